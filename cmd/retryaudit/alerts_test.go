package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// TestUnconfiguredAlertsAfterRestart: an alert recorded while Slack was not
// configured is delivered, once, after Slack is configured and the service
// restarted.
func TestUnconfiguredAlertsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"RETRYAUDIT_DATA_DIR": dir, "RETRYAUDIT_TOKEN": tok("shared-token")}
	first := startService(t, vars)
	for _, call := range []struct{ path, body string }{
		{"/v1/claims", `{"source":"shop","event_id":"order-unsent","execution_id":"4711","workflow_id":"wf1"}`},
		{"/v1/outcomes", `{"source":"shop","event_id":"order-unsent","outcome":"unknown","execution_id":"4711","workflow_id":"wf1"}`},
	} {
		if code, body := first.api(t, "POST", call.path, call.body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", call.path, code, body)
		}
	}
	db, err := sqlx.Open("sqlite", filepath.Join(dir, "retryaudit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	state := func() string {
		var s string
		db.Get(&s, `SELECT state FROM outbox WHERE event_id = 'order-unsent' AND kind = 'alert'`)
		return s
	}
	// The worker polls every 2 s: a few polls are enough.
	for deadline := time.Now().Add(20 * time.Second); state() != "unconfigured" && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if s := state(); s != "unconfigured" {
		t.Fatalf("the alert is %q while Slack is not configured", s)
	}
	first.stop()

	slack := &slackCounter{posts: map[string]int{}}
	fake := httptest.NewServer(slack)
	defer fake.Close()
	vars["RETRYAUDIT_SLACK_BOT_TOKEN"], vars["RETRYAUDIT_SLACK_CHANNEL"], vars["RETRYAUDIT_SLACK_API_URL"] = "xoxb-test", "C1", fake.URL
	second := startService(t, vars)
	for deadline := time.Now().Add(20 * time.Second); state() != "sent" && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	second.stop()
	if s := state(); s != "sent" {
		t.Fatalf("after configuring Slack and restarting, the alert is %q", s)
	}
	slack.mu.Lock()
	defer slack.mu.Unlock()
	posted := 0
	for key, n := range slack.posts {
		if strings.Contains(key, "chat.postMessage") && strings.Contains(key, "order-unsent") {
			posted += n
		}
	}
	if posted != 1 {
		t.Errorf("posted %d times: %v", posted, slack.posts)
	}
}

// TestPermanentSlackErrorLoggedOnce: Slack refuses every post for a reason
// that needs a person (channel_not_found). Both workers of the instance
// dead-letter alerts, and the reason is logged once, not once per worker.
func TestPermanentSlackErrorLoggedOnce(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/chat.postMessage") {
				time.Sleep(300 * time.Millisecond) // both workers hold a row at once
				w.Write([]byte(`{"ok":false,"error":"channel_not_found"}`))
				return
			}
			w.Write([]byte(`{"ok":true,"user":"bot","team":"t"}`))
		}))
		defer fake.Close()
		dbURL := audittest.URL(t, dialect)
		svc := startService(t, map[string]string{"RETRYAUDIT_DATABASE_URL": dbURL, "RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-test",
			"RETRYAUDIT_SLACK_CHANNEL": "C1", "RETRYAUDIT_SLACK_API_URL": fake.URL})
		const alerts = 6
		for i := range alerts {
			for _, call := range []struct{ path, body string }{
				{"/v1/claims", fmt.Sprintf(`{"source":"shop","event_id":"o-%d","execution_id":"%d","workflow_id":"wf1"}`, i, i)},
				{"/v1/outcomes", fmt.Sprintf(`{"source":"shop","event_id":"o-%d","outcome":"unknown","execution_id":"%d","workflow_id":"wf1"}`, i, i)},
			} {
				if code, body := svc.api(t, "POST", call.path, call.body); code != http.StatusOK {
					t.Fatalf("%s: %d %s", call.path, code, body)
				}
			}
		}
		waitForOutbox(t, dialect, dbURL)
		svc.stop()
		var owners []string
		openDB(t, dialect, dbURL).Select(&owners, `SELECT DISTINCT attempted_by FROM outbox WHERE state = 'dead'`)
		if len(owners) < 2 {
			t.Skipf("one worker attempted every row (%v): the test needs both", owners)
		}
		if n := strings.Count(svc.Output.String(), "a message cannot be delivered"); n != 1 {
			t.Errorf("the reason is logged %d times by one instance:\n%s", n, svc.Output.String())
		}
	})
}
