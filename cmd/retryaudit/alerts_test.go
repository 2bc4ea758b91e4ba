package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// TestUnconfiguredAlertsAfterRestart: an alert recorded while Slack was not
// configured is delivered, once, after Slack is configured and the service
// restarted.
func TestUnconfiguredAlertsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"RETRYAUDIT_DATA_DIR": dir, "RETRYAUDIT_TOKEN": "shared-token"}
	first := startService(t, vars)
	for _, call := range []struct{ path, body string }{
		{"/v1/claims", `{"source":"shop","event_id":"order-unsent","execution_id":"4711"}`},
		{"/v1/outcomes", `{"source":"shop","event_id":"order-unsent","outcome":"unknown","execution_id":"4711"}`},
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
