package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSlackTest(t *testing.T) {
	fake := httptest.NewServer(&slackCounter{posts: map[string]int{}})
	defer fake.Close()
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
		{"a bot token", map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-secret", "RETRYAUDIT_SLACK_CHANNEL": "C1",
			"RETRYAUDIT_SLACK_API_URL": fake.URL}, true, []string{"auth.test: ok", "channel C1: ok, message 1700000000."}},
		{"an incoming webhook", map[string]string{"RETRYAUDIT_SLACK_WEBHOOK_URL": fake.URL + "/services/T/B/secret"}, true,
			[]string{"webhook at 127.0.0.1"}},
		{"a refused channel", map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-secret", "RETRYAUDIT_SLACK_CHANNEL": "C9",
			"RETRYAUDIT_SLACK_API_URL": refusing.URL}, false, []string{"FAIL", "channel_not_found"}},
		{"nothing configured", map[string]string{}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
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
