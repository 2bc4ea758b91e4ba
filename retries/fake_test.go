package retries_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeN8N is n8n's public API as a retry meets it (FACTS: "What a Retry
// needs"): GET /executions/{id}; POST /executions/{id}/retry answers once
// the new execution has finished (onRetry runs it), 409 for one that did
// not fail, 404 for one n8n does not have (pruned).
type fakeN8N struct {
	*httptest.Server
	mu      sync.Mutex
	execs   map[string]map[string]any
	retries map[string]int // POST /retry calls by execution
	seq     int
	// onRetry runs the new execution (reports to the ledger) and returns
	// its final status.
	onRetry func(newID, of string) string
	// hold, when set, is waited on by every retry before it answers.
	hold chan struct{}
	// slow, when set, is waited on by every question about an execution
	// (n8n slow or unreachable), until the asker gives up.
	slow chan struct{}
}

func newFakeN8N(t *testing.T) *fakeN8N {
	f := &fakeN8N{execs: map[string]map[string]any{}, retries: map[string]int{}, seq: 100}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.mu.Lock()
		if f.hold != nil {
			close(f.hold)
			f.hold = nil
		}
		if f.slow != nil {
			close(f.slow)
			f.slow = nil
		}
		f.mu.Unlock()
		f.Close()
	})
	return f
}

func (f *fakeN8N) set(id, status, retryOf string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mode := "webhook"
	var ro any
	if retryOf != "" {
		mode, ro = "retry", retryOf
	}
	f.execs[id] = map[string]any{"id": id, "workflowId": "wf", "mode": mode, "status": status, "retryOf": ro,
		"startedAt": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), "stoppedAt": nil}
}

func (f *fakeN8N) prune(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.execs, id)
}

func (f *fakeN8N) retried(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retries[id]
}

func (f *fakeN8N) totalRetries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.retries {
		n += c
	}
	return n
}

func (f *fakeN8N) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	slow := f.slow
	f.mu.Unlock()
	if slow != nil && !strings.HasSuffix(r.URL.Path, "/retry") {
		select {
		case <-slow:
		case <-r.Context().Done():
			return
		}
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v1/executions/")
	id, retry := strings.CutSuffix(path, "/retry")
	f.mu.Lock()
	x, ok := f.execs[id]
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !ok:
		f.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
		return
	case !retry:
		json.NewEncoder(w).Encode(x)
		f.mu.Unlock()
		return
	case x["status"] != "error" && x["status"] != "crashed":
		f.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"message":"The execution succeeded, so it cannot be retried."}`)
		return
	}
	f.retries[id]++
	f.seq++
	newID := fmt.Sprint(f.seq)
	hold, run := f.hold, f.onRetry
	f.mu.Unlock()
	f.set(newID, "running", id)
	status := "success"
	if run != nil {
		status = run(newID, id)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-time.After(time.Minute):
		}
	}
	f.set(newID, status, id)
	f.mu.Lock()
	json.NewEncoder(w).Encode(f.execs[newID])
	f.mu.Unlock()
}
