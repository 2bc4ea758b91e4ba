package notify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/handlers"
)

// TestIntakeDoesNotWaitForSlack: the request that records an error returns
// while Slack hangs; the alert goes out when Slack answers again.
func TestIntakeDoesNotWaitForSlack(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		r.worker.Poll = 20 * time.Millisecond
		gate := make(chan struct{})
		r.slack.mu.Lock()
		r.slack.gate = gate
		r.slack.mu.Unlock()
		released := false
		release := func() {
			if !released {
				released = true
				close(gate)
			}
		}
		defer release()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.worker.Run(ctx); close(done) }()
		defer func() { cancel(); release(); <-done }()

		h, err := handlers.New(handlers.Config{Store: r.store, Token: "t", Links: links})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h.Engine())
		defer srv.Close()
		post := func(path, body string) int {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer t")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s did not answer while Slack hangs: %v", path, err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := post("/v1/claims", `{"source":"n8n","event_id":"evt-lab-0001","execution_id":"2","workflow_id":"LabMainWorkflow1"}`); code != 200 {
			t.Fatalf("claim: %d", code)
		}
		body, err := os.ReadFile("../handlers/testdata/payloads/error-01-first-delivery.json")
		if err != nil {
			t.Fatal(err)
		}
		if code := post("/v1/n8n/errors", string(body)); code != http.StatusAccepted {
			t.Fatalf("intake: %d", code)
		}
		if code := post("/v1/n8n/errors", strings.Replace(string(body), `"id": "2"`, `"id": "2002"`, 1)); code != http.StatusAccepted {
			t.Fatalf("second intake: %d", code)
		}
		release()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			var pending int
			r.store.DB().Get(&pending, `SELECT count(*) FROM outbox WHERE thread_key LIKE 'event:%' AND state <> 'sent'`)
			if pending == 0 && len(r.slack.ok()) > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if sent := r.slack.ok(); len(sent) == 0 || !strings.Contains(sent[0].Text, "evt-lab-0001") {
			t.Errorf("after Slack came back: %+v", sent)
		}
		var last struct {
			ID    int64  `db:"id"`
			State string `db:"state"`
		}
		if err := r.store.DB().Get(&last, `SELECT id, state FROM outbox WHERE thread_key LIKE 'group:%' ORDER BY id LIMIT 1`); err != nil {
			t.Fatal(err)
		}
		if last.State != audit.OutboxPending {
			t.Errorf("the unlinked error's alert is %q, want pending during its grace", last.State)
		}
	})
}
