package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

func TestSlackTest(t *testing.T) {
	fake := httptest.NewServer(&slackCounter{posts: map[string]int{}})
	defer fake.Close()
	scoped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-OAuth-Scopes", "chat:write,channels:history,groups:history")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": "bot", "team": "t", "channel": "C1", "ts": "1.2"})
	}))
	defer scoped.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":false,"error":"channel_not_found"}`))
	}))
	defer refusing.Close()
	tests := []struct {
		name string
		vars map[string]string
		ok   bool
		says []string
	}{
		{"a bot token without the history scope", map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-secret",
			"RETRYAUDIT_SLACK_CHANNEL": "C1", "RETRYAUDIT_SLACK_API_URL": fake.URL}, true,
			[]string{"auth.test: ok", "chat:write MISSING", "after a timeout a message may be posted twice",
				"channel C1: ok, message 1700000000.", "outbox: the database is not migrated yet"}},
		{"a bot token with every scope", map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-secret",
			"RETRYAUDIT_SLACK_CHANNEL": "C1", "RETRYAUDIT_SLACK_API_URL": scoped.URL}, true,
			[]string{"chat:write (post)", "is looked for, not posted twice", "[token has: chat:write,channels:history,groups:history]"}},
		{"an incoming webhook", map[string]string{"RETRYAUDIT_SLACK_WEBHOOK_URL": fake.URL + "/services/T/B/secret"}, true,
			[]string{"webhook at 127.0.0.1"}},
		{"a refused channel", map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-secret", "RETRYAUDIT_SLACK_CHANNEL": "C9",
			"RETRYAUDIT_SLACK_API_URL": refusing.URL}, false, []string{"FAIL", "channel_not_found"}},
		{"nothing configured", map[string]string{}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.vars["RETRYAUDIT_DATA_DIR"] = t.TempDir()
			var out bytes.Buffer
			err := run(context.Background(), []string{"slack-test"}, env(tc.vars), &out)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v\n%s", err, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output lacks %q:\n%s", s, out.String())
				}
			}
			if strings.Contains(out.String(), "secret") {
				t.Errorf("a secret is printed:\n%s", out.String())
			}
		})
	}
}

// TestSlackTestCountsWaitingAlerts: slack-test says how many alerts wait,
// and how many the next start queues again because the configuration
// changed since they could not be sent.
func TestSlackTestCountsWaitingAlerts(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		url := audittest.URL(t, dialect)
		s := audittest.OpenURL(t, store.Options{URL: url})
		ctx := context.Background()
		for i := range 3 {
			event := fmt.Sprintf("order-%d", i)
			if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: fmt.Sprint(100 + i)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event,
				Outcome: audit.OutcomeUnknown, ExecutionID: fmt.Sprint(100 + i)}); err != nil {
				t.Fatal(err)
			}
		}
		// Two were recorded while Slack was not configured; one waits.
		if _, err := s.DB().Exec(`UPDATE outbox SET state = 'unconfigured' WHERE event_id <> 'order-2'`); err != nil {
			t.Fatal(err)
		}
		fake := httptest.NewServer(&slackCounter{posts: map[string]int{}})
		defer fake.Close()
		var out bytes.Buffer
		vars := map[string]string{"RETRYAUDIT_DATABASE_URL": url, "RETRYAUDIT_DATA_DIR": t.TempDir(),
			"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-1", "RETRYAUDIT_SLACK_CHANNEL": "C1", "RETRYAUDIT_SLACK_API_URL": fake.URL}
		if err := run(ctx, []string{"slack-test"}, env(vars), &out); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		want := "outbox: 1 alerts wait to be sent; 2 more of the last 24 h"
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	})
}
