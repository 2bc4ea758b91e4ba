//go:build n8n

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookTap stands between n8n's execution hooks and the service: it passes
// every hook call on and records each report the service accepted. It can
// also play a service that is away: one that takes calls and never answers
// (hang), or one that answers 503 (pause).
type hookTap struct {
	*httptest.Server
	upstream string
	mu       sync.Mutex
	mode     string        // "" (pass on), "hang" or "pause"
	release  chan struct{} // closed when a hang ends
	seen     map[string]*tapExecution
	calls    int
}

// tapExecution is what the service accepted about one execution.
type tapExecution struct {
	Starts, Ends []tapReport
}

// tapReport is one report as the hooks sent it.
type tapReport struct {
	Phase        string `json:"phase"`
	ExecutionID  string `json:"execution_id"`
	WorkflowID   string `json:"workflow_id"`
	WorkflowName string `json:"workflow_name"`
	Mode         string `json:"mode"`
	RetryOf      string `json:"retry_of"`
	StartedAt    string `json:"started_at"`
	StoppedAt    string `json:"stopped_at"`
	Status       string `json:"status"`
	LastNode     string `json:"last_node"`
	Error        *struct {
		Message string `json:"message"`
		Node    string `json:"node"`
	} `json:"error"`
	At time.Time `json:"-"` // when the service accepted it
}

func newHookTap(t *testing.T, upstream string) *hookTap {
	tap := &hookTap{upstream: upstream, seen: map[string]*tapExecution{}, release: make(chan struct{})}
	tap.Server = httptest.NewServer(http.HandlerFunc(tap.serve))
	t.Cleanup(func() {
		tap.set("")
		tap.Close()
	})
	return tap
}

func (tap *hookTap) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tap.mu.Lock()
	tap.calls++
	mode, release := tap.mode, tap.release
	tap.mu.Unlock()
	switch mode {
	case "hang":
		select {
		case <-r.Context().Done():
		case <-release:
		}
		fallthrough
	case "pause":
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{"code": "unavailable",
			"message": "the test keeps the service away"}})
		return
	}
	req, _ := http.NewRequest(r.Method, tap.upstream+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": map[string]any{"code": "unavailable", "message": err.Error()}})
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		tap.record(body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

func (tap *hookTap) record(body []byte) {
	var call struct {
		Reports []tapReport `json:"reports"`
	}
	json.Unmarshal(body, &call)
	now := time.Now()
	tap.mu.Lock()
	defer tap.mu.Unlock()
	for _, r := range call.Reports {
		r.At = now
		x := tap.seen[r.ExecutionID]
		if x == nil {
			x = &tapExecution{}
			tap.seen[r.ExecutionID] = x
		}
		if r.Phase == "start" {
			x.Starts = append(x.Starts, r)
		} else {
			x.Ends = append(x.Ends, r)
		}
	}
}

// set changes how calls are answered: "" passes them on, "hang" holds them
// unanswered, "pause" answers 503. Leaving "hang" answers the held calls 503.
func (tap *hookTap) set(mode string) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if tap.mode == "hang" && mode != "hang" {
		close(tap.release)
		tap.release = make(chan struct{})
	}
	tap.mode = mode
}

// reset forgets what the tap saw: n8n's ids may start again.
func (tap *hookTap) reset() {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	tap.seen = map[string]*tapExecution{}
}

// pause keeps the hooks' reports from the service until the returned
// function is called.
func (tap *hookTap) pause() func() {
	tap.set("pause")
	return func() { tap.set("") }
}

// execution returns what the service accepted about an execution.
func (tap *hookTap) execution(id string) tapExecution {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if x := tap.seen[id]; x != nil {
		return tapExecution{Starts: append([]tapReport(nil), x.Starts...), Ends: append([]tapReport(nil), x.Ends...)}
	}
	return tapExecution{}
}

// n8nExecution is an execution as n8n's public API lists it.
type n8nExecution struct {
	ID         string    `json:"id"`
	Mode       string    `json:"mode"`
	Status     string    `json:"status"`
	RetryOf    string    `json:"retryOf"`
	WorkflowID string    `json:"workflowId"`
	StartedAt  time.Time `json:"startedAt"`
	StoppedAt  time.Time `json:"stoppedAt"`
}

// executionsSince lists n8n's executions started at or after since, oldest
// first.
func (n *n8n) executionsSince(t *testing.T, since time.Time) []n8nExecution {
	t.Helper()
	var out []n8nExecution
	cursor := ""
	for {
		var page struct {
			Data       []n8nExecution `json:"data"`
			NextCursor string         `json:"nextCursor"`
		}
		path := "/executions?limit=250"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		n.api(t, "GET", path, nil, http.StatusOK, &page)
		older := false
		for _, x := range page.Data {
			if x.StartedAt.IsZero() || !x.StartedAt.Before(since) {
				out = append(out, x)
			} else {
				older = true
			}
		}
		if page.NextCursor == "" || older {
			break
		}
		cursor = page.NextCursor
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out
}

// throughHooks checks that every execution n8n started since then reached
// the service through the hooks: one start and one end, with n8n's mode,
// status, Retry lineage and start time. ends waits for ends of executions
// still running; an execution n8n has not started (no start time) is left out.
func throughHooks(t *testing.T, n *n8n, tap *hookTap, since time.Time, within time.Duration) {
	t.Helper()
	var last string
	deadline := time.Now().Add(within)
	for {
		var problems []string
		xs := n.executionsSince(t, since)
		for _, x := range xs {
			if x.StartedAt.IsZero() {
				continue
			}
			if p := tap.check(x); p != "" {
				problems = append(problems, p)
			}
		}
		if len(problems) == 0 {
			t.Logf("the hooks reported all %d executions n8n started since %s", len(xs), since.Format(time.TimeOnly))
			return
		}
		last = strings.Join(problems, "\n  ")
		if time.Now().After(deadline) {
			t.Errorf("after %s, not every execution reached the service through the hooks:\n  %s", within, last)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// check compares what the service accepted about an execution with what
// n8n says of it, and returns what differs ("" for nothing).
func (tap *hookTap) check(x n8nExecution) string {
	got := tap.execution(x.ID)
	name := fmt.Sprintf("execution %s (%s, %s)", x.ID, x.Mode, x.Status)
	switch {
	case x.Status == "running" || x.Status == "new":
		return name + " still runs"
	case len(got.Starts) != 1:
		return fmt.Sprintf("%s: %d starts arrived, want 1", name, len(got.Starts))
	case len(got.Ends) == 0:
		return name + ": no end arrived"
	}
	want := 1
	if x.Status == "waiting" {
		want = len(got.Ends) // a Wait node's execution ends again when it resumes
	}
	if len(got.Ends) != want {
		return fmt.Sprintf("%s: %d ends arrived, want 1", name, len(got.Ends))
	}
	s, e := got.Starts[0], got.Ends[len(got.Ends)-1]
	for _, r := range []tapReport{s, e} {
		started, _ := time.Parse(time.RFC3339Nano, r.StartedAt)
		switch {
		case r.Mode != x.Mode || r.WorkflowID != x.WorkflowID || r.RetryOf != x.RetryOf:
			return fmt.Sprintf("%s: the %s says mode %q, workflow %q, retry of %q", name, r.Phase, r.Mode, r.WorkflowID, r.RetryOf)
		case !started.Equal(x.StartedAt):
			return fmt.Sprintf("%s: the %s says it started at %s, n8n says %s", name, r.Phase, r.StartedAt, x.StartedAt.Format(time.RFC3339Nano))
		}
	}
	if e.Status != x.Status {
		return fmt.Sprintf("%s: the end says status %q", name, e.Status)
	}
	return ""
}
