//go:build n8n

package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slackSecret signs the fake Slack's interactions; slackAdmin is the Slack
// user mapped to the pages' admin.
const (
	slackSecret = "e2e-slack-signing-secret"
	slackAdmin  = "U0E2EADMIN"
)

// TestRealN8NSlackRetry acts on a failed execution of the shipped orders
// workflow from Slack, on a real n8n: the CRM fails (every call answered
// 500), the execution fails and the error workflow reports it; the alert
// carries buttons; a person presses Mark failed (a signed interaction to
// POST /slack/interactions), the alert is updated in place and offers
// Retry in n8n; the press of that retries the failed execution — n8n
// resumes at the failed CRM step — which creates exactly one order and
// settles the entry done.
func TestRealN8NSlackRetry(t *testing.T) {
	home := os.Getenv("RETRYAUDIT_TEST_N8N_HOME")
	if home == "" {
		t.Fatal("RETRYAUDIT_TEST_N8N_HOME is unset: run make test-n8n, which installs n8n and sets it")
	}
	s := &suite{crm: newFakeCRM(t), slack: newFakeSlack(t), bin: buildService(t), token: randomToken(),
		hookToken: randomToken(), env: map[string]string{"RETRYAUDIT_SLACK_SIGNING_SECRET": slackSecret,
			"RETRYAUDIT_SLACK_USERS": slackAdmin + "=admin"}}
	s.serviceURL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	s.n8n = startN8NWith(t, home, n8nConfig{})
	s.wire(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			s.crm.reset()
			s.slack.reset()
			r := &run{suite: s, t: t, backend: backend, svc: s.startService(t, backend),
				prefix: map[string]string{"sqlite": "ss", "postgres": "sp"}[backend]}
			t.Run("a failed execution marked failed and retried from Slack ends done with one order", r.retryFromSlack)
		})
	}
}

func (r *run) retryFromSlack(t *testing.T) {
	id := r.newID()
	r.failedInN8N(t, id)
	var value string
	eventually(t, alertWithin, "an alert about shop/"+id+" with Mark failed", func() string {
		value = r.slack.latestAction("shop / "+id, "retryaudit_failed")
		if value == "" {
			return "no Mark failed button yet"
		}
		return ""
	})
	if code := r.press(t, "retryaudit_failed", value); code != http.StatusOK {
		t.Fatalf("the signed press answered %d", code)
	}
	eventually(t, alertWithin, "the alert updated with Retry in n8n", func() string {
		value = r.slack.latestAction("shop / "+id, "retryaudit_retry")
		if value == "" {
			return "the entry is " + r.ledger(t, "shop", id).Status + "; no Retry in n8n button yet"
		}
		return ""
	})
	if e := r.ledger(t, "shop", id); e.Status != "failed" {
		t.Fatalf("after Mark failed the entry is %s", e.Status)
	}
	creates := r.crm.createCount()
	if code := r.press(t, "retryaudit_retry", value); code != http.StatusOK {
		t.Fatalf("the signed press answered %d", code)
	}
	eventually(t, 3*time.Minute, "the entry done after the retry", func() string {
		if e := r.ledger(t, "shop", id); e.Status != "done" {
			return "the entry is " + e.Status
		}
		return ""
	})
	o := r.oneOrder(t, "shop", id)
	e := r.ledger(t, "shop", id)
	if e.CRMRef != o.ID {
		t.Errorf("after the retry the entry has crm_ref %q, want %s", e.CRMRef, o.ID)
	}
	if n := r.crm.createCount() - creates; n != 1 {
		t.Errorf("the retry sent %d creates, want 1", n)
	}
	// The same Retry button again: stale, nothing sent.
	r.press(t, "retryaudit_retry", value)
	time.Sleep(2 * time.Second)
	if n := r.crm.createCount() - creates; n != 1 {
		t.Errorf("%d creates after the stale button, want 1", n)
	}
	eventually(t, alertWithin, "the alert updated without buttons", func() string {
		if v := r.slack.latestAction("shop / "+id, "retryaudit_retry"); v != "" {
			return "the alert still offers Retry in n8n"
		}
		return ""
	})
}

// press sends the service a button's press as Slack does: signed.
func (r *run) press(t *testing.T, action, value string) int {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]string{"id": slackAdmin},
		"channel": map[string]string{"id": "C0RETRYAUDIT"},
		"actions": []map[string]string{{"type": "button", "block_id": "retryaudit_actions", "action_id": action,
			"value": value}}})
	body := url.Values{"payload": {string(payload)}}.Encode()
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(slackSecret))
	mac.Write([]byte("v0:" + stamp + ":" + body))
	req, err := http.NewRequest("POST", r.svc.URL+"/slack/interactions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// latestAction returns the value of an action button on the newest
// version (post or update) of the first message about needle; "" when it
// has no such button.
func (s *fakeSlack) latestAction(needle, action string) string {
	root, _, ok := s.thread(needle)
	if !ok {
		return ""
	}
	blocks := root.Blocks
	s.mu.Lock()
	for _, m := range s.msgs {
		if m.Method == "chat.update" && m.TS == root.TS {
			blocks = m.Blocks
		}
	}
	s.mu.Unlock()
	var bs []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	json.Unmarshal([]byte(blocks), &bs)
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.ActionID == action && strings.TrimSpace(e.Value) != "" {
				return e.Value
			}
		}
	}
	return ""
}
