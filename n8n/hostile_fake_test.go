package n8n_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The ways a hostile (or badly broken) n8n answers, one at a time.
const (
	modeEndless = "endless pages"            // every listing page full, with a new cursor each time
	modeRepeat  = "a repeated cursor"        // every page gives the cursor of the first again
	modeCycle   = "a cycling cursor"         // a, b, a, b, …
	modeNoStop  = "endless unplaceable ones" // endless pages of failures without a stop time, new ids each
	modeHuge    = "25 MiB answers"           // with their Content-Length
	modeChunked = "25 MiB answers, chunked"  // without one: read until the cap
	modeDrip    = "a slow drip"              // a byte every 100 ms, for ever
)

var hostileModes = []string{modeEndless, modeRepeat, modeCycle, modeNoStop, modeHuge, modeChunked, modeDrip}

// hostileN8N answers every call of the service and of connect the way its
// mode says; in the listing modes, /discover and lookups answer as n8n's
// do, so that the listings are reached.
type hostileN8N struct {
	*httptest.Server
	mu   sync.Mutex
	mode string
	seq  atomic.Int64 // new ids and cursors
}

func newHostileN8N(t *testing.T) *hostileN8N {
	h := &hostileN8N{mode: modeEndless}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

func (h *hostileN8N) setMode(m string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mode = m
}

func (h *hostileN8N) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	mode := h.mode
	h.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/api/v1")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case mode == modeHuge || mode == modeChunked || mode == modeDrip:
		h.body(w, r, mode)
	case path == "/discover":
		io.WriteString(w, `{"data":{"scopes":["credential:list","credential:create","credential:update","workflow:list",`+
			`"workflow:read","workflow:create","workflow:update","workflow:activate","execution:read","execution:list"],`+
			`"resources":{"workflow":{"endpoints":[{"method":"POST","path":"/api/v1/workflows/{workflowId}/publish"}]}}}}`)
	case strings.HasPrefix(path, "/executions/") || strings.HasPrefix(path, "/workflows/"):
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"Not Found"}`)
	default:
		h.page(w, r, mode, path)
	}
}

// page writes a page of the listing at path, with its nextCursor.
func (h *hostileN8N) page(w http.ResponseWriter, r *http.Request, mode, path string) {
	cursor := r.URL.Query().Get("cursor")
	next := "c" + strconv.FormatInt(h.seq.Add(1), 10)
	switch mode {
	case modeRepeat:
		next = "the-same-cursor"
	case modeCycle:
		next = map[string]string{"": "a", "a": "b", "b": "a"}[cursor]
	}
	now := time.Now().UTC()
	var items []string
	for range 10 {
		id := strconv.FormatInt(h.seq.Add(1), 10)
		switch path {
		case "/executions":
			// Stopped hours ago, started within the lookback: not in the
			// window, and no page says the listing can stop.
			stopped := fmt.Sprintf(`,"stoppedAt":%q`, now.Add(-3*time.Hour).Format(time.RFC3339))
			if mode == modeNoStop {
				stopped = ""
			}
			items = append(items, fmt.Sprintf(`{"id":%q,"workflowId":"wf1","mode":"webhook","status":"error",`+
				`"startedAt":%q%s}`, id, now.Add(-time.Minute).Format(time.RFC3339), stopped))
		case "/credentials":
			items = append(items, fmt.Sprintf(`{"id":%q,"name":"cred %s","type":"httpHeaderAuth"}`, id, id))
		default:
			items = append(items, fmt.Sprintf(`{"id":%q,"name":"workflow %s","active":true,"nodes":[{"id":"n1",`+
				`"type":"n8n-nodes-base.webhook","parameters":{"path":"p%s"}}],"settings":{},"connections":{}}`, id, id, id))
		}
	}
	fmt.Fprintf(w, `{"data":[%s],"nextCursor":%q}`, strings.Join(items, ","), next)
}

// body writes 25 MiB of a page that looks right (with or without its
// length), or drips it.
func (h *hostileN8N) body(w http.ResponseWriter, r *http.Request, mode string) {
	const size = 25 << 20
	chunk := []byte(strings.Repeat(`{"id":"1","name":"x","status":"error","mode":"webhook"},`, 1000))
	if mode == modeHuge {
		w.Header().Set("Content-Length", strconv.Itoa(size))
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	if mode == modeDrip {
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}
	io.WriteString(w, `{"data":[`)
	for written := 9; written+len(chunk) <= size; written += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return // the client stopped reading: what it should do
		}
	}
}
