package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// runCheck runs retryaudit check with env and returns its output and error.
func runCheck(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	if env["RETRYAUDIT_DATA_DIR"] == "" {
		env["RETRYAUDIT_DATA_DIR"] = t.TempDir()
	}
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"check"}, args...), func(k string) string { return env[k] }, &out)
	return out.String(), err
}

// migrated returns a database URL with the schema applied.
func migrated(t *testing.T, dialect string) string {
	t.Helper()
	url := audittest.URL(t, dialect)
	s := audittest.OpenURL(t, store.Options{URL: url})
	s.Close()
	return url
}

func failLine(out, name string) bool {
	return regexp.MustCompile(`(?m)^FAIL  ` + regexp.QuoteMeta(name) + `\s`).MatchString(out)
}

func TestCheckSound(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		out, err := runCheck(t, map[string]string{"RETRYAUDIT_DATABASE_URL": migrated(t, dialect), "RETRYAUDIT_TOKEN": tok("tok")})
		if err != nil || !strings.Contains(out, "all checks passed") || strings.Contains(out, "FAIL") {
			t.Fatalf("err %v:\n%s", err, out)
		}
		for _, name := range []string{"database", "schema", "unique key", "token", "drill: twice", "drill: race",
			"drill: new id", "drill: source", "drill: unknown", "drill: retry", "cleanup"} {
			if !regexp.MustCompile(`(?m)^ok    ` + regexp.QuoteMeta(name)).MatchString(out) {
				t.Errorf("no ok line for %s:\n%s", name, out)
			}
		}
	})
}

func TestCheckThroughTheRunningService(t *testing.T) {
	dir := t.TempDir()
	svc := startService(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir})
	out, err := runCheck(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir}, "--url", svc.URL)
	if err != nil || !strings.Contains(out, "through "+svc.URL) || strings.Count(out, "ok    drill: ") != 7 {
		t.Fatalf("err %v:\n%s", err, out)
	}
	for _, source := range []string{"retryaudit-check", "retryaudit-check.other"} {
		if code, body := svc.api(t, "GET", "/v1/events?source="+source, ""); code != 200 || strings.Contains(body, "drill") ||
			strings.Contains(body, "retryaudit-check-") {
			t.Errorf("the drill left events behind: %s", body)
		}
	}
	if code, body := svc.api(t, "GET", "/v1/n8n/errors", ""); code == 200 && strings.Contains(body, "retryaudit-check-") {
		t.Errorf("the drill left errors behind: %s", body)
	}
}

func TestCheckFailures(t *testing.T) {
	fakeSlack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":false,"error":"invalid_auth"}`))
	}))
	defer fakeSlack.Close()
	fakeN8N := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"message":"unauthorized"}`))
	}))
	defer fakeN8N.Close()

	noKey := migrated(t, "postgres")
	s := audittest.OpenURL(t, store.Options{URL: noKey})
	if _, err := s.DB().Exec(`ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_pkey CASCADE`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), minHashCost)
	alice := "alice:" + string(hash)
	tests := []struct {
		name string
		env  map[string]string
		fail string
		says string
	}{
		{"no database", map[string]string{"RETRYAUDIT_DATABASE_URL": "postgres://postgres@127.0.0.1:1/none?sslmode=disable"},
			"database", "ping"},
		{"a schema not migrated", map[string]string{"RETRYAUDIT_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "new.db")},
			"schema", "retryaudit migrate"},
		{"the unique key missing", map[string]string{"RETRYAUDIT_DATABASE_URL": noKey}, "unique key", "(source, event_id)"},
		{"a bad Slack token", map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-bad", "RETRYAUDIT_SLACK_CHANNEL": "C1",
			"RETRYAUDIT_SLACK_API_URL": fakeSlack.URL}, "slack", "invalid_auth"},
		{"n8n refusing the key", map[string]string{"RETRYAUDIT_N8N_API_URL": fakeN8N.URL + "/api/v1",
			"RETRYAUDIT_N8N_API_KEY": "bad"}, "n8n API", "refused the API key (401)"},
		{"no token", map[string]string{}, "token", "RETRYAUDIT_TOKEN is unset"},
		{"a bad configuration", map[string]string{"RETRYAUDIT_RETENTION": "1d"}, "configuration", "under 3 days"},
		{"a signing secret without a bot token", map[string]string{"RETRYAUDIT_SLACK_WEBHOOK_URL": fakeSlack.URL,
			"RETRYAUDIT_SLACK_SIGNING_SECRET": "s", "RETRYAUDIT_SLACK_USERS": "U0ALICE1=alice", "RETRYAUDIT_UI_USERS": alice},
			"configuration", "only the bot's messages carry buttons"},
		{"a refused app token", map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-bad", "RETRYAUDIT_SLACK_CHANNEL": "C1",
			"RETRYAUDIT_SLACK_API_URL": fakeSlack.URL, "RETRYAUDIT_SLACK_APP_TOKEN": "xapp-bad",
			"RETRYAUDIT_SLACK_USERS": "U0ALICE1=alice", "RETRYAUDIT_UI_USERS": alice},
			"slack actions", "apps.connections.open refused the app token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"RETRYAUDIT_TOKEN": tok("tok")}
			if tc.fail == "token" {
				delete(env, "RETRYAUDIT_TOKEN")
			}
			for k, v := range tc.env {
				env[k] = v
			}
			if env["RETRYAUDIT_DATABASE_URL"] == "" {
				env["RETRYAUDIT_DATABASE_URL"] = migrated(t, "sqlite")
			}
			out, err := runCheck(t, env)
			if err == nil {
				t.Fatalf("check passed:\n%s", out)
			}
			if !failLine(out, tc.fail) {
				t.Errorf("no FAIL line for %s:\n%s", tc.fail, out)
			}
			if !strings.Contains(out, tc.says) {
				t.Errorf("the output does not say %q:\n%s", tc.says, out)
			}
			if strings.Contains(out, "xoxb-bad") || strings.Contains(out, "xapp-bad") {
				t.Error("the Slack token is in the output")
			}
		})
	}
}

// TestCheckHeldBackAlert: an alert waiting longer than it should to reach
// Slack fails the check, which says how many and since when.
func TestCheckHeldBackAlert(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		url := migrated(t, dialect)
		earlier := func() time.Time { return time.Now().Add(-12 * time.Minute) }
		s := audittest.OpenURL(t, store.Options{URL: url, Now: earlier})
		ctx := context.Background()
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "held", ExecutionID: "1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "held", ExecutionID: "1",
			Outcome: audit.OutcomeUnknown}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		out, err := runCheck(t, map[string]string{"RETRYAUDIT_DATABASE_URL": url, "RETRYAUDIT_TOKEN": tok("tok")})
		if err == nil || !failLine(out, "alerts") || !strings.Contains(out, "1 Slack message has waited more than 5m") {
			t.Errorf("err %v:\n%s", err, out)
		}
	})
}
