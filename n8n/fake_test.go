package n8n_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const fakeKey = "n8n-api-key-for-tests"

// fakeN8N is n8n's public API as far as the service uses it: one execution
// by id, and the failed executions in pages, newest id first as n8n lists
// them (or by stop time, to show that reconciliation does not rely on the
// order).
type fakeN8N struct {
	*httptest.Server
	mu         sync.Mutex
	executions map[string]map[string]any
	pageSize   int           // the fake's own page size, to force paging
	byStop     bool          // list by stop time, newest first, instead of by id as n8n does
	failPage   int           // when > 0, that page (1-based) answers 500 once
	gate       chan struct{} // when set, lookups wait for it: a slow n8n
	arrived    chan string   // lookups tell which id they are waiting for
	calls      []string
	pages      int  // list pages served
	down       bool // n8n's process is gone: every connection is cut
	cursorLoop bool // pages after the first give the first page's cursor again
}

func newFakeN8N(t *testing.T) *fakeN8N {
	f := &fakeN8N{executions: map[string]map[string]any{}, pageSize: 2}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeN8N) url() string { return f.URL + "/api/v1" }

// add makes n8n know an execution that ran from 10:00:00 to 10:00:01.
func (f *fakeN8N) add(id, mode, retryOf, status string) {
	f.addRun(id, mode, retryOf, status, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), time.Second)
}

// addRun makes n8n know an execution that started at start and ran for
// took; failed ones are listed.
func (f *fakeN8N) addRun(id, mode, retryOf, status string, start time.Time, took time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parent any
	if retryOf != "" {
		parent = retryOf
	}
	f.executions[id] = map[string]any{"id": id, "mode": mode, "retryOf": parent, "status": status,
		"workflowId": "wf1", "finished": false, "startedAt": start.UTC().Format(time.RFC3339Nano),
		"stoppedAt": start.Add(took).UTC().Format(time.RFC3339Nano),
		"data": map[string]any{"resultData": map[string]any{"lastNodeExecuted": "Create CRM order",
			"error": map[string]any{"message": "CRM answered 502 for execution " + id,
				"description": "Bad gateway", "node": map[string]any{"name": "Create CRM order"}}}}}
}

// order returns the failed executions as the list gives them: by id,
// newest first (n8n's order), or by stop time.
func (f *fakeN8N) order() []string {
	var ids []string
	for id, x := range f.executions {
		if x["status"] == "error" {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		if f.byStop {
			if c := strings.Compare(f.executions[b]["stoppedAt"].(string), f.executions[a]["stoppedAt"].(string)); c != 0 {
				return c
			}
		}
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return y - x
	})
	return ids
}

func (f *fakeN8N) called(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == path {
			n++
		}
	}
	return n
}

func (f *fakeN8N) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.URL.Path)
	gate, arrived, down := f.gate, f.arrived, f.down
	f.mu.Unlock()
	if down {
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
		return
	}
	if r.Header.Get("X-N8N-API-KEY") != fakeKey {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]any{"message": "unauthorized"})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/executions")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if id := strings.TrimPrefix(rest, "/"); id != "" {
		if gate != nil {
			arrived <- id
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		f.mu.Lock()
		x, ok := f.executions[id]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"message": "Not Found"})
			return
		}
		if r.URL.Query().Get("includeData") != "true" {
			x = withoutData(x)
		}
		json.NewEncoder(w).Encode(x)
		return
	}
	f.list(w, r)
}

func (f *fakeN8N) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Query().Get("status") != "error" {
		http.Error(w, "the service only lists failed executions", http.StatusBadRequest)
		return
	}
	f.pages++
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	if f.failPage > 0 && start/f.pageSize+1 == f.failPage {
		f.failPage = 0
		http.Error(w, `{"message":"database busy"}`, http.StatusInternalServerError)
		return
	}
	order := f.order()
	end := min(start+f.pageSize, len(order))
	page := []any{}
	for _, id := range order[start:end] {
		page = append(page, withoutData(f.executions[id]))
	}
	var next any
	if end < len(order) {
		next = strconv.Itoa(end)
		if f.cursorLoop && start > 0 {
			next = strconv.Itoa(f.pageSize)
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"data": page, "nextCursor": next})
}

func withoutData(x map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range x {
		if k != "data" {
			out[k] = v
		}
	}
	return out
}

// setDown stops n8n's process (every connection cut) or starts it again.
func (f *fakeN8N) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}
