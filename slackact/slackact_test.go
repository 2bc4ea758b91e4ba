package slackact_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/slackact"
)

const (
	alice   = "U0ALICE1" // mapped to alice
	mallory = "U0MALLORY"
)

type rig struct {
	store   *store.Store
	slack   *fakeSlack
	worker  *notify.Worker
	handler *slackact.Handler
	http    http.Handler
}

func newRig(t *testing.T, dialect string) *rig {
	t.Helper()
	r := &rig{slack: newFakeSlack(t)}
	r.store = audittest.Open(t, dialect, store.Options{})
	bot := notify.NewBot(notify.BotConfig{Token: botToken, Channel: "C0ALERTS", APIURL: r.slack.apiURL()})
	renderer := notify.NewRenderer(audit.Links{BaseURL: "https://retryaudit.example"}, nil)
	renderer.Actions = notify.ActionButtons{On: true}
	r.worker = &notify.Worker{Store: r.store, Notifier: bot, Renderer: renderer, Owner: "w1",
		MinInterval: time.Millisecond, Poll: 50 * time.Millisecond}
	r.handler = &slackact.Handler{Actions: slackact.StoreActions{Store: r.store},
		Users: map[string]string{alice: "alice"}, Reply: bot, Log: slog.New(slog.DiscardHandler)}
	r.http = r.handler.Interactions(secret)
	return r
}

// unknown makes an entry wait for a person, and sends its alert.
func (r *rig) unknown(t *testing.T, event string) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: "4711",
		WorkflowID: "wf1", WorkflowName: "Orders to CRM"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event,
		Outcome: audit.OutcomeUnknown, ExecutionID: "4711", Reason: "timeout after 30s"}); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
}

func (r *rig) drain(t *testing.T) {
	t.Helper()
	if _, err := r.worker.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) event(t *testing.T, event string) audit.EventDetail {
	t.Helper()
	d, err := r.store.Event(context.Background(), "shop", event)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// buttons reads the action buttons of a message's blocks: action id →
// value.
func buttons(t *testing.T, blocks string) map[string]string {
	t.Helper()
	var bs slack.Blocks
	if err := json.Unmarshal([]byte(blocks), &bs); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, b := range bs.BlockSet {
		if a, ok := b.(*slack.ActionBlock); ok {
			for _, e := range a.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok && btn.URL == "" {
					out[btn.ActionID] = btn.Value
				}
			}
		}
	}
	return out
}

// payload is the interaction Slack sends when user presses a button.
func payload(user, actionID, value string) string {
	raw, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]string{"id": user, "username": "someone"},
		"channel":   map[string]string{"id": "C0ALERTS"},
		"container": map[string]string{"type": "message", "channel_id": "C0ALERTS", "message_ts": "1700000000.100001"},
		"actions":   []map[string]string{{"type": "button", "action_id": actionID, "block_id": "retryaudit_actions", "value": value}},
	})
	return string(raw)
}

// signed is Slack's request for an interaction, signed with key at ts.
func signed(body, key string, ts time.Time) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte("v0:" + stamp + ":" + body))
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return req
}

func (r *rig) post(req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.http.ServeHTTP(w, req)
	r.handler.Wait()
	return w
}

func form(p string) string { return url.Values{"payload": {p}}.Encode() }

func TestSignedPressMarksDoneAndUpdatesTheMessage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect)
		r.unknown(t, "ord-1")
		first := r.slack.waitFor(t, "chat.postMessage", 1)[0]
		b := buttons(t, first.Blocks)
		if b[notify.ActionDone] == "" || b[notify.ActionFailed] == "" {
			t.Fatalf("the alert has no Mark done / Mark failed buttons: %v", b)
		}
		v, err := notify.ParseActionValue(b[notify.ActionDone])
		if err != nil {
			t.Fatal(err)
		}
		ev := r.event(t, "ord-1")
		if v.Source != "shop" || v.EventID != "ord-1" || v.Holder != "4711" || v.Version != ev.Version {
			t.Fatalf("the button carries %+v, the entry is at version %d", v, ev.Version)
		}

		w := r.post(signed(form(payload(alice, notify.ActionDone, b[notify.ActionDone])), secret, time.Now()))
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		ev = r.event(t, "ord-1")
		if ev.Status != audit.StatusDone || ev.ResolvedBy != "alice" {
			t.Fatalf("after the press: %s by %q", ev.Status, ev.ResolvedBy)
		}
		last := ev.History[len(ev.History)-1]
		if last.Kind != audit.KindResolution || last.Actor != "alice" || last.Message != slackact.Via ||
			last.Delivery != audit.ViaSlack {
			t.Fatalf("the history says %+v", last)
		}
		eph := r.slack.waitFor(t, "chat.postEphemeral", 1)[0]
		if eph.User != alice || eph.Channel != "C0ALERTS" || !strings.Contains(eph.Text, "Marked done") {
			t.Fatalf("the answer: %+v", eph)
		}

		// The outbox updates the alert in place: who did what, no buttons.
		r.drain(t)
		up := r.slack.waitFor(t, "chat.update", 1)
		u := up[len(up)-1]
		if u.TS != first.TS {
			t.Fatalf("chat.update of %s, the alert is %s", u.TS, first.TS)
		}
		if !strings.Contains(u.Blocks, "Resolved done by alice: via Slack") {
			t.Fatalf("the updated message does not say who did what: %s", u.Blocks)
		}
		if left := buttons(t, u.Blocks); len(left) != 0 {
			t.Fatalf("a settled entry's message still has buttons: %v", left)
		}

		// The same button again is refused, with the state now.
		r.post(signed(form(payload(alice, notify.ActionFailed, b[notify.ActionFailed])), secret, time.Now()))
		eph = r.slack.waitFor(t, "chat.postEphemeral", 2)[1]
		if !strings.HasPrefix(eph.Text, "Nothing was changed") || !strings.Contains(eph.Text, "done") {
			t.Fatalf("a stale button's answer: %q", eph.Text)
		}
		if ev := r.event(t, "ord-1"); ev.Status != audit.StatusDone {
			t.Fatalf("a stale button changed the entry to %s", ev.Status)
		}
	})
}

func TestStaleButtonIsRefusedWithTheCurrentState(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect)
		r.unknown(t, "ord-2")
		b := buttons(t, r.slack.waitFor(t, "chat.postMessage", 1)[0].Blocks)
		// Bob marks it failed on the page, and the sender's next delivery
		// takes it: the message's version and holder are old.
		ctx := context.Background()
		v, _ := notify.ParseActionValue(b[notify.ActionDone])
		if _, err := r.store.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "ord-2", To: audit.StatusFailed,
			Actor: "bob", Note: "not in the CRM", Version: v.Version}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "ord-2", ExecutionID: "4800",
			WorkflowID: "wf1"}); err != nil {
			t.Fatal(err)
		}
		before := r.event(t, "ord-2")
		r.post(signed(form(payload(alice, notify.ActionDone, b[notify.ActionDone])), secret, time.Now()))
		eph := r.slack.waitFor(t, "chat.postEphemeral", 1)[0]
		if !strings.HasPrefix(eph.Text, "Nothing was changed") ||
			!strings.Contains(eph.Text, "now "+strconv.FormatInt(before.Version, 10)) {
			t.Fatalf("the answer does not show the state now (version %d): %q", before.Version, eph.Text)
		}
		if after := r.event(t, "ord-2"); after.Version != before.Version || after.Status != before.Status {
			t.Fatalf("a stale button changed the entry: %s v%d → %s v%d", before.Status, before.Version,
				after.Status, after.Version)
		}
	})
}

func TestUnmappedUserIsRefused(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect)
		r.unknown(t, "ord-3")
		b := buttons(t, r.slack.waitFor(t, "chat.postMessage", 1)[0].Blocks)
		before := r.event(t, "ord-3")
		r.post(signed(form(payload(mallory, notify.ActionFailed, b[notify.ActionFailed])), secret, time.Now()))
		eph := r.slack.waitFor(t, "chat.postEphemeral", 1)[0]
		if eph.User != mallory || !strings.Contains(eph.Text, "You cannot act") ||
			!strings.Contains(eph.Text, "Nothing was changed") {
			t.Fatalf("the answer: %+v", eph)
		}
		if after := r.event(t, "ord-3"); after.Version != before.Version {
			t.Fatalf("an unmapped user changed the entry: %s", after.Status)
		}
	})
}

func TestUnsignedRequestsAreRefused(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect)
		r.unknown(t, "ord-4")
		b := buttons(t, r.slack.waitFor(t, "chat.postMessage", 1)[0].Blocks)
		body := form(payload(alice, notify.ActionDone, b[notify.ActionDone]))
		before := r.event(t, "ord-4")
		for _, tc := range []struct {
			name string
			req  func() *http.Request
			code string
		}{
			{"a wrong secret", func() *http.Request { return signed(body, "another-secret", time.Now()) }, "bad_signature"},
			{"a timestamp six minutes old", func() *http.Request { return signed(body, secret, time.Now().Add(-6*time.Minute)) }, "old_timestamp"},
			{"a timestamp six minutes ahead", func() *http.Request { return signed(body, secret, time.Now().Add(6*time.Minute)) }, "old_timestamp"},
			{"no signature", func() *http.Request {
				req := signed(body, secret, time.Now())
				req.Header.Del("X-Slack-Signature")
				return req
			}, "unsigned"},
			{"no timestamp", func() *http.Request {
				req := signed(body, secret, time.Now())
				req.Header.Del("X-Slack-Request-Timestamp")
				return req
			}, "unsigned"},
			{"a body changed after signing", func() *http.Request {
				req := signed(body, secret, time.Now())
				other := form(payload(alice, notify.ActionFailed, b[notify.ActionFailed]))
				req.Body = http.NoBody
				req2 := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(other))
				req2.Header = req.Header
				return req2
			}, "bad_signature"},
			{"a signature not hex", func() *http.Request {
				req := signed(body, secret, time.Now())
				req.Header.Set("X-Slack-Signature", "v0=zz")
				return req
			}, "bad_signature"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := r.post(tc.req())
				if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`) {
					t.Fatalf("status %d %s, want 401 %s", w.Code, w.Body, tc.code)
				}
			})
		}
		if after := r.event(t, "ord-4"); after.Version != before.Version {
			t.Fatalf("a refused request changed the entry: %s", after.Status)
		}
		if n := len(r.slack.of("chat.postEphemeral")); n != 0 {
			t.Fatalf("refused requests were answered in Slack %d times", n)
		}
		big := bytes.Repeat([]byte("a"), slackact.MaxBody+1)
		if w := r.post(signed(string(big), secret, time.Now())); w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("a body over the bound: %d", w.Code)
		}
	})
}

func TestSocketModePressMarksFailed(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect)
		r.unknown(t, "ord-5")
		b := buttons(t, r.slack.waitFor(t, "chat.postMessage", 1)[0].Blocks)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- r.handler.RunSocket(ctx, slackact.SocketConfig{AppToken: appToken, APIURL: r.slack.apiURL()})
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
		var conn interface{ WriteJSON(any) error }
		select {
		case c := <-r.slack.conns:
			conn = c
		case <-time.After(10 * time.Second):
			t.Fatal("no Socket Mode connection opened")
		}
		if err := conn.WriteJSON(map[string]any{"envelope_id": "env-1", "type": "interactive",
			"accepts_response_payload": false,
			"payload":                  json.RawMessage(payload(alice, notify.ActionFailed, b[notify.ActionFailed]))}); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-r.slack.acks:
			if id != "env-1" {
				t.Fatalf("acknowledged %q", id)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the interaction was not acknowledged")
		}
		eph := r.slack.waitFor(t, "chat.postEphemeral", 1)[0]
		if !strings.Contains(eph.Text, "Marked failed") {
			t.Fatalf("the answer: %q", eph.Text)
		}
		if ev := r.event(t, "ord-5"); ev.Status != audit.StatusFailed || ev.ResolvedBy != "alice" {
			t.Fatalf("after the press over Socket Mode: %s by %q", ev.Status, ev.ResolvedBy)
		}
	})
}

func TestTheRouteNeedsNoSignInButTheSignature(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect)
		h, err := handlers.New(handlers.Config{Store: r.store, Token: strings.Repeat("t", 32),
			HookToken: strings.Repeat("h", 32), SlackInteractions: r.http})
		if err != nil {
			t.Fatal(err)
		}
		engine := h.Engine()
		r.unknown(t, "ord-6")
		b := buttons(t, r.slack.waitFor(t, "chat.postMessage", 1)[0].Blocks)
		body := form(payload(alice, notify.ActionDone, b[notify.ActionDone]))

		w := httptest.NewRecorder()
		engine.ServeHTTP(w, signed(body, "wrong", time.Now()))
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "bad_signature") {
			t.Fatalf("a wrong signature through the route: %d %s", w.Code, w.Body)
		}
		w = httptest.NewRecorder()
		engine.ServeHTTP(w, signed(body, secret, time.Now()))
		r.handler.Wait()
		if w.Code != http.StatusOK {
			t.Fatalf("a signed press through the route: %d %s", w.Code, w.Body)
		}
		if ev := r.event(t, "ord-6"); ev.Status != audit.StatusDone {
			t.Fatalf("after a signed press through the route: %s", ev.Status)
		}
	})
}

func TestCheckAppToken(t *testing.T) {
	f := newFakeSlack(t)
	ctx := context.Background()
	if err := slackact.CheckAppToken(ctx, slackact.SocketConfig{AppToken: appToken, APIURL: f.apiURL()}); err != nil {
		t.Fatalf("the fake's app token: %v", err)
	}
	err := slackact.CheckAppToken(ctx, slackact.SocketConfig{AppToken: "xapp-wrong-secret", APIURL: f.apiURL()})
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("a refused app token: %v", err)
	}
}
