package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"

	"github.com/retryaudit/retryaudit/notify"
)

// actionSlack is Slack for serve's buttons: the Web API (messages, their
// updates, ephemeral answers) and a Socket Mode connection.
type actionSlack struct {
	*httptest.Server
	mu    sync.Mutex
	calls []url.Values // with "method"
	conns chan *websocket.Conn
	acks  chan string
}

func newActionSlack(t *testing.T) *actionSlack {
	f := &actionSlack{conns: make(chan *websocket.Conn, 4), acks: make(chan string, 16)}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/socket" {
			conn, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer conn.Close()
			conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1})
			f.conns <- conn
			for {
				var ack struct {
					EnvelopeID string `json:"envelope_id"`
				}
				if conn.ReadJSON(&ack) != nil {
					return
				}
				f.acks <- ack.EnvelopeID
			}
		}
		r.ParseForm()
		method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		w.Header().Set("Content-Type", "application/json")
		if method == "apps.connections.open" {
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(f.URL, "http") + "/socket"})
			return
		}
		f.mu.Lock()
		v := url.Values{"method": {method}}
		for k := range r.Form {
			v.Set(k, r.Form.Get(k))
		}
		f.calls = append(f.calls, v)
		ts := r.Form.Get("ts")
		if method == "chat.postMessage" {
			ts = fmt.Sprintf("1700000000.%06d", len(f.calls))
			v.Set("ts", ts)
		}
		f.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C0ALERTS", "ts": ts, "user": "bot", "team": "t"})
	}))
	t.Cleanup(f.Close)
	return f
}

// wait returns the first call of a method that has want in field, once
// it came.
func (f *actionSlack) wait(t *testing.T, method, field, want string) url.Values {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		for _, c := range f.calls {
			if c.Get("method") == method && strings.Contains(c.Get(field), want) {
				f.mu.Unlock()
				return c
			}
		}
		f.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var seen []string
	for _, c := range f.calls {
		seen = append(seen, c.Get("method")+": "+c.Get("text"))
	}
	t.Fatalf("no %s with %s containing %q; calls:\n%s", method, field, want, strings.Join(seen, "\n"))
	return nil
}

func actionValue(t *testing.T, blocks, action string) string {
	t.Helper()
	var bs slack.Blocks
	if err := json.Unmarshal([]byte(blocks), &bs); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs.BlockSet {
		if a, ok := b.(*slack.ActionBlock); ok {
			for _, e := range a.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok && btn.ActionID == action {
					return btn.Value
				}
			}
		}
	}
	t.Fatalf("no %s button in %s", action, blocks)
	return ""
}

func pressPayload(user, action, value string) string {
	raw, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]string{"id": user},
		"channel": map[string]string{"id": "C0ALERTS"},
		"actions": []map[string]string{{"type": "button", "block_id": "retryaudit_actions", "action_id": action, "value": value}}})
	return string(raw)
}

// TestServeTakesPressesBothWays runs serve with a bot, a signing secret
// and an app token: an alert carries the buttons; a press signed to
// POST /slack/interactions marks one event done and its alert is updated
// in place; a press over Socket Mode marks another failed.
func TestServeTakesPressesBothWays(t *testing.T) {
	f := newActionSlack(t)
	const secret = "serve-signing-secret"
	svc := startService(t, map[string]string{"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-serve",
		"RETRYAUDIT_SLACK_CHANNEL": "C0ALERTS", "RETRYAUDIT_SLACK_API_URL": f.URL + "/api",
		"RETRYAUDIT_SLACK_SIGNING_SECRET": secret, "RETRYAUDIT_SLACK_APP_TOKEN": "xapp-serve",
		"RETRYAUDIT_SLACK_USERS": "U0ADMIN=admin"})
	for _, id := range []string{"by-http", "by-socket"} {
		for _, call := range [][2]string{
			{"/v1/claims", `{"source":"shop","event_id":"` + id + `","execution_id":"` + id + `-1","workflow_id":"wf1"}`},
			{"/v1/outcomes", `{"source":"shop","event_id":"` + id + `","outcome":"unknown","execution_id":"` + id + `-1","workflow_id":"wf1"}`},
		} {
			if code, body := svc.api(t, "POST", call[0], call[1]); code != http.StatusOK {
				t.Fatalf("%s: %d %s", call[0], code, body)
			}
		}
	}

	alert := f.wait(t, "chat.postMessage", "text", "by-http")
	body := url.Values{"payload": {pressPayload("U0ADMIN", notify.ActionDone,
		actionValue(t, alert.Get("blocks"), notify.ActionDone))}}.Encode()
	post := func(key string) int {
		req, _ := http.NewRequest("POST", svc.URL+"/slack/interactions", strings.NewReader(body))
		stamp := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write([]byte("v0:" + stamp + ":" + body))
		req.Header.Set("X-Slack-Request-Timestamp", stamp)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("not-the-secret"); code != http.StatusUnauthorized {
		t.Fatalf("a wrongly signed press: %d", code)
	}
	if code := post(secret); code != http.StatusOK {
		t.Fatalf("a signed press: %d", code)
	}
	defer func() {
		if t.Failed() {
			t.Log(svc.Output.String())
		}
	}()
	f.wait(t, "chat.postEphemeral", "text", "Marked done")
	update := f.wait(t, "chat.update", "blocks", "Resolved done by admin: via Slack")
	if update.Get("ts") != alert.Get("ts") || strings.Contains(update.Get("blocks"), notify.ActionDone) {
		t.Fatalf("the alert's update: %v", update)
	}
	if _, got := svc.api(t, "GET", "/v1/events/shop/by-http", ""); !strings.Contains(got, `"status":"done"`) {
		t.Fatalf("after the signed press: %s", got)
	}

	var conn *websocket.Conn
	select {
	case conn = <-f.conns:
	case <-time.After(30 * time.Second):
		t.Fatal("serve opened no Socket Mode connection")
	}
	alert = f.wait(t, "chat.postMessage", "text", "by-socket")
	conn.WriteJSON(map[string]any{"envelope_id": "env-serve", "type": "interactive",
		"payload": json.RawMessage(pressPayload("U0ADMIN", notify.ActionFailed,
			actionValue(t, alert.Get("blocks"), notify.ActionFailed)))})
	select {
	case id := <-f.acks:
		if id != "env-serve" {
			t.Fatalf("acknowledged %q", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the press over Socket Mode was not acknowledged")
	}
	f.wait(t, "chat.postEphemeral", "text", "Marked failed")
	if _, got := svc.api(t, "GET", "/v1/events/shop/by-socket", ""); !strings.Contains(got, `"status":"failed"`) {
		t.Fatalf("after the press over Socket Mode: %s", got)
	}
}
