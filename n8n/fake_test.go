package n8n_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const fakeKey = "n8n-api-key-for-tests"

// fakeN8N is n8n's public API as far as the service uses it: one execution
// by id, and the failed executions, newest first, in pages.
type fakeN8N struct {
	*httptest.Server
	mu         sync.Mutex
	executions map[string]map[string]any
	order      []string      // ids, newest first, as the list returns them
	pageSize   int           // the fake's own page size, to force paging
	gate       chan struct{} // when set, lookups wait for it: a slow n8n
	arrived    chan string   // lookups tell which id they are waiting for
	calls      []string
}

func newFakeN8N(t *testing.T) *fakeN8N {
	f := &fakeN8N{executions: map[string]map[string]any{}, pageSize: 2}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeN8N) url() string { return f.URL + "/api/v1" }

// add makes n8n know an execution; failed ones are listed, newest first.
func (f *fakeN8N) add(id, mode, retryOf, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parent any
	if retryOf != "" {
		parent = retryOf
	}
	f.executions[id] = map[string]any{"id": id, "mode": mode, "retryOf": parent, "status": status,
		"workflowId": "wf1", "finished": false, "startedAt": "2026-12-02T10:00:00.000Z",
		"stoppedAt": "2026-12-02T10:00:01.000Z",
		"data": map[string]any{"resultData": map[string]any{"lastNodeExecuted": "Create CRM order",
			"error": map[string]any{"message": "CRM answered 502 for execution " + id,
				"node": map[string]any{"name": "Create CRM order"}}}}}
	if status == "error" {
		f.order = append([]string{id}, f.order...)
	}
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
	gate, arrived := f.gate, f.arrived
	f.mu.Unlock()
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
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	end := min(start+f.pageSize, len(f.order))
	page := []any{}
	for _, id := range f.order[start:end] {
		page = append(page, withoutData(f.executions[id]))
	}
	var next any
	if end < len(f.order) {
		next = strconv.Itoa(end)
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
