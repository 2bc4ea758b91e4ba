//go:build n8n

package e2e

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// crmMode is how the fake CRM answers.
type crmMode string

const (
	crmNormal  crmMode = "normal"                     // answers at once
	crmSlow    crmMode = "slow"                       // answers creates after crmSlowFor
	crmHang    crmMode = "creates-then-never-answers" // creates the order, then never answers
	crm422     crmMode = "422"                        // refuses creates; creates nothing
	crm500     crmMode = "500"                        // answers everything with 500; creates nothing
	crmGarbled crmMode = "garbled"                    // answers lookups with something that is not a list of orders
)

// crmSlowFor is how long the slow CRM takes to create an order: long enough
// for a redelivery to arrive while the first run is still going.
const crmSlowFor = 6 * time.Second

// crmOrder is an order as the CRM keeps it.
type crmOrder struct {
	ID             string         `json:"id"`
	ExternalID     string         `json:"external_id"`
	IdempotencyKey string         `json:"-"`
	Body           map[string]any `json:"-"`
}

// fakeCRM is a CRM with its own state: orders by external id, one per
// idempotency key. Its API is under /api; /orders?external_id= is the page
// people open from the alert's "CRM order" button. /rss is a feed that works
// once and then fails, for the trigger error.
type fakeCRM struct {
	*httptest.Server
	mu       sync.Mutex
	mode     crmMode
	orders   map[string]crmOrder // by external id
	byKey    map[string]string   // idempotency key → external id
	creates  int                 // create requests received
	lookups  int
	feedHits int
	release  chan struct{} // closed at the end: hung requests return
}

func newFakeCRM(t *testing.T) *fakeCRM {
	c := &fakeCRM{mode: crmNormal, orders: map[string]crmOrder{}, byKey: map[string]string{},
		release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/orders", c.lookup)
	mux.HandleFunc("POST /api/orders", c.create)
	mux.HandleFunc("GET /orders", c.page)
	mux.HandleFunc("GET /rss", c.feed)
	c.Server = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(c.release)
		c.Close()
	})
	return c
}

// api is the base URL the workflow's CRM block is given.
func (c *fakeCRM) api() string { return c.URL + "/api" }

func (c *fakeCRM) setMode(m crmMode) {
	c.mu.Lock()
	c.mode = m
	c.mu.Unlock()
}

// reset forgets every order (between the SQLite and the PostgreSQL run).
func (c *fakeCRM) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode, c.orders, c.byKey, c.creates, c.lookups = crmNormal, map[string]crmOrder{}, map[string]string{}, 0, 0
}

// order returns the CRM's order for an external id.
func (c *fakeCRM) order(externalID string) (crmOrder, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.orders[externalID]
	return o, ok
}

// createCount is how many create requests the CRM received.
func (c *fakeCRM) createCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates
}

// resetFeed makes the feed work once more, then fail.
func (c *fakeCRM) resetFeed() {
	c.mu.Lock()
	c.feedHits = 0
	c.mu.Unlock()
}

func (c *fakeCRM) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.orders)
}

func (c *fakeCRM) lookup(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.lookups++
	mode := c.mode
	o, ok := c.orders[r.URL.Query().Get("external_id")]
	c.mu.Unlock()
	switch mode {
	case crm500:
		http.Error(w, `{"error":"internal"}`, http.StatusInternalServerError)
		return
	case crmGarbled: // 200, and not the documented shape: must never be taken for "absent"
		writeJSON(w, http.StatusOK, map[string]any{"result": "ok"})
		return
	}
	list := []crmOrder{}
	if ok {
		list = append(list, o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": list})
}

func (c *fakeCRM) create(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	ext, _ := body["external_id"].(string)
	c.mu.Lock()
	c.creates++
	mode := c.mode
	switch mode {
	case crm422:
		c.mu.Unlock()
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": "currency not supported"})
		return
	case crm500:
		c.mu.Unlock()
		http.Error(w, `{"error":"internal"}`, http.StatusInternalServerError)
		return
	}
	if key == "" || ext == "" {
		c.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "Idempotency-Key and external_id are required"})
		return
	}
	status := http.StatusOK
	if prev, ok := c.byKey[key]; ok {
		ext = prev // the same key again: the same order
	} else if _, ok := c.orders[ext]; !ok {
		status = http.StatusCreated
		c.orders[ext] = crmOrder{ID: fmt.Sprintf("CRM-%d", len(c.orders)+1), ExternalID: ext, IdempotencyKey: key, Body: body}
		c.byKey[key] = ext
	}
	o := c.orders[ext]
	c.mu.Unlock()
	switch mode {
	case crmHang:
		select { // created; the answer never comes
		case <-r.Context().Done():
		case <-c.release:
		}
		return
	case crmSlow:
		select {
		case <-time.After(crmSlowFor):
		case <-c.release:
			return
		}
	}
	writeJSON(w, status, o)
}

// page is the CRM's own page of an order, where the alert's CRM button
// leads.
func (c *fakeCRM) page(w http.ResponseWriter, r *http.Request) {
	ext := r.URL.Query().Get("external_id")
	o, ok := c.order(ext)
	if !ok {
		http.Error(w, "no order with external id "+ext, http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, "<h1>Order %s</h1><p>external id %s</p>", html.EscapeString(o.ID), html.EscapeString(o.ExternalID))
}

// feed answers one valid RSS feed (n8n reads it when the workflow is
// published), then fails: the trigger fails at its next poll.
func (c *fakeCRM) feed(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.feedHits++
	n := c.feedHits
	c.mu.Unlock()
	if n > 1 {
		http.Error(w, "feed unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/rss+xml")
	fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>orders</title>`+
		`<item><title>one</title><guid>1</guid></item></channel></rss>`)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
