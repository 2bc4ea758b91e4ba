package notify_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

const (
	botToken    = "xoxb-1111-2222-secret-bot-token"
	webhookPath = "/services/T0000/B0000/SeCrEtWeBhOoKpAtH"
)

// call is one request the fake Slack received.
type call struct {
	Method   string // chat.postMessage, chat.update, auth.test, conversations.history, webhook
	Token    string
	Channel  string
	Text     string
	Blocks   string // raw JSON
	Metadata string // raw JSON
	ThreadTS string
	TS       string    // the message updated, or the one a post created
	At       time.Time // when it arrived, in real time
	OK       bool      // answered with success
}

// message is one message in the fake's channels, as conversations.history
// returns it.
type message struct {
	Channel  string          `json:"-"`
	TS       string          `json:"ts"`
	ThreadTS string          `json:"thread_ts,omitempty"`
	Text     string          `json:"text"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// fakeSlack is Slack's Web API and an incoming webhook as far as retryaudit
// uses them: it keeps what was posted (conversations.history and
// conversations.replies find it, with its metadata), answers auth.test with
// the token's scopes, and can be slow, hang, fail or rate-limit, call by
// call. A post is kept before the fake waits to answer: like Slack, it may
// have the message when the client has given up.
type fakeSlack struct {
	*httptest.Server
	now      func() time.Time // for the ts of messages
	mu       sync.Mutex
	calls    []call
	messages []message
	seq      int
	scopes   string // X-OAuth-Scopes
	// fail, when set, may answer instead of the fake: it returns the
	// status, headers and body to send, or status 0 to go on.
	fail func(c call) (int, map[string]string, string)
	// delay, when set, says how long to wait before answering a call.
	delay func(c call) time.Duration
	// gate, when set, holds every request until it is closed.
	gate chan struct{}
}

func newFakeSlack(t *testing.T, now func() time.Time) *fakeSlack {
	f := &fakeSlack{now: now, scopes: "chat:write,channels:history"}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSlack) apiURL() string     { return f.URL + "/api" }
func (f *fakeSlack) webhookURL() string { return f.URL + webhookPath }

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	c := call{At: time.Now()}
	if r.URL.Path == webhookPath {
		c.Method = "webhook"
		var body struct {
			Text   string          `json:"text"`
			Blocks json.RawMessage `json:"blocks"`
		}
		raw, _ := io.ReadAll(r.Body)
		json.Unmarshal(raw, &body)
		c.Text, c.Blocks = body.Text, string(body.Blocks)
	} else {
		c.Method = strings.TrimPrefix(r.URL.Path, "/api/")
		r.ParseForm()
		c.Token, c.Channel, c.Text = r.Form.Get("token"), r.Form.Get("channel"), r.Form.Get("text")
		c.Blocks, c.ThreadTS, c.TS, c.Metadata = r.Form.Get("blocks"), r.Form.Get("thread_ts"), r.Form.Get("ts"), r.Form.Get("metadata")
		if auth := r.Header.Get("Authorization"); c.Token == "" && strings.HasPrefix(auth, "Bearer ") {
			c.Token = strings.TrimPrefix(auth, "Bearer ")
		}
	}
	status, headers, body := f.answer(&c, r)
	f.mu.Lock()
	delay := f.delay
	f.mu.Unlock()
	if delay != nil {
		if d := delay(c); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
			}
		}
	}
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// answer records the call and decides the answer.
func (f *fakeSlack) answer(c *call, r *http.Request) (int, map[string]string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.calls = append(f.calls, *c) }()
	if f.fail != nil {
		if status, headers, body := f.fail(*c); status != 0 {
			return status, headers, body
		}
	}
	if c.Method != "webhook" && c.Token != botToken {
		return 0, nil, `{"ok":false,"error":"invalid_auth"}`
	}
	c.OK = true
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	switch c.Method {
	case "webhook":
		if bad := invalidBlocks(c.Text, c.Blocks); bad != "" {
			c.OK = false
			return http.StatusBadRequest, nil, bad
		}
		f.messages = append(f.messages, message{Channel: "webhook", Text: c.Text})
		return 0, nil, "ok"
	case "chat.postMessage", "chat.update":
		if bad := invalidBlocks(c.Text, c.Blocks); bad != "" {
			c.OK = false
			return 0, nil, js(map[string]any{"ok": false, "error": bad})
		}
	}
	switch c.Method {
	case "chat.postMessage":
		f.seq++
		c.TS = fmt.Sprintf("%d.%06d", f.now().Unix(), f.seq)
		f.messages = append(f.messages, message{Channel: c.Channel, TS: c.TS, ThreadTS: c.ThreadTS, Text: c.Text,
			Metadata: json.RawMessage(c.Metadata)})
		return 0, nil, js(map[string]any{"ok": true, "channel": c.Channel, "ts": c.TS})
	case "chat.update":
		for i := range f.messages {
			if f.messages[i].TS == c.TS {
				f.messages[i].Text = c.Text
			}
		}
		return 0, nil, js(map[string]any{"ok": true, "channel": c.Channel, "ts": c.TS, "text": c.Text})
	case "auth.test":
		return 0, map[string]string{"X-OAuth-Scopes": f.scopes}, js(map[string]any{"ok": true, "user": "retryaudit", "team": "Shop"})
	case "conversations.history", "conversations.replies":
		if !slices.Contains(strings.Split(f.scopes, ","), "channels:history") {
			c.OK = false
			return 0, nil, `{"ok":false,"error":"missing_scope","needed":"channels:history"}`
		}
		return 0, nil, js(map[string]any{"ok": true, "messages": f.history(c.Method, r), "has_more": false})
	}
	c.OK = false
	return 0, nil, `{"ok":false,"error":"unknown_method"}`
}

// history returns the messages of a channel (or of a thread) since oldest,
// newest first, with their metadata only when asked for.
func (f *fakeSlack) history(method string, r *http.Request) []message {
	oldest, _ := strconv.ParseFloat(r.Form.Get("oldest"), 64)
	var out []message
	for _, m := range f.messages {
		ts, _ := strconv.ParseFloat(m.TS, 64)
		if m.Channel != r.Form.Get("channel") || ts < oldest {
			continue
		}
		inThread := m.ThreadTS != "" && m.ThreadTS != m.TS
		if method == "conversations.history" && inThread {
			continue
		}
		if method == "conversations.replies" && m.TS != r.Form.Get("ts") && m.ThreadTS != r.Form.Get("ts") {
			continue
		}
		if r.Form.Get("include_all_metadata") != "1" {
			m.Metadata = nil
		}
		out = append([]message{m}, out...)
	}
	return out
}

// ok returns the calls answered with success.
func (f *fakeSlack) ok() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.OK {
			out = append(out, c)
		}
	}
	return out
}

// posts returns the successful calls of the methods that put a message in
// the channel.
func (f *fakeSlack) posts() []call {
	var out []call
	for _, c := range f.ok() {
		if c.Method == "chat.postMessage" || c.Method == "webhook" {
			out = append(out, c)
		}
	}
	return out
}

// stored returns the messages the channels hold.
func (f *fakeSlack) stored() []message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]message(nil), f.messages...)
}

func (f *fakeSlack) all() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// setFail sets the fail function. It runs with the fake's lock held, so it
// may read f.calls directly (the calls before this one).
func (f *fakeSlack) setFail(fn func(c call) (int, map[string]string, string)) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

func (f *fakeSlack) setDelay(fn func(c call) time.Duration) {
	f.mu.Lock()
	f.delay = fn
	f.mu.Unlock()
}

func (f *fakeSlack) setScopes(s string) {
	f.mu.Lock()
	f.scopes = s
	f.mu.Unlock()
}

// invalidBlocks checks a message's Block Kit against Slack's limits, as
// Slack does: it returns the error Slack answers, or "".
func invalidBlocks(text, raw string) string {
	if utf16Len(text) > 40000 {
		return "msg_too_long"
	}
	if raw == "" {
		return ""
	}
	var blocks []struct {
		Type     string           `json:"type"`
		Text     *textObject      `json:"text"`
		Fields   []textObject     `json:"fields"`
		Elements []map[string]any `json:"elements"`
	}
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil || len(blocks) > 50 {
		return "invalid_blocks"
	}
	for _, b := range blocks {
		switch b.Type {
		case "header":
			if b.Text == nil || b.Text.Type != "plain_text" || utf16Len(b.Text.Text) > 150 {
				return "invalid_blocks"
			}
		case "section":
			if (b.Text != nil && utf16Len(b.Text.Text) > 3000) || len(b.Fields) > 10 || (b.Text == nil && len(b.Fields) == 0) {
				return "invalid_blocks"
			}
			for _, f := range b.Fields {
				if utf16Len(f.Text) > 2000 {
					return "invalid_blocks"
				}
			}
		case "context":
			if len(b.Elements) > 10 {
				return "invalid_blocks"
			}
		case "actions":
			if len(b.Elements) > 25 {
				return "invalid_blocks"
			}
			for _, e := range b.Elements {
				u, _ := e["url"].(string)
				label, _ := e["text"].(map[string]any)["text"].(string)
				if utf16Len(u) > 3000 || utf16Len(label) > 75 {
					return "invalid_blocks"
				}
			}
		default:
			return "invalid_blocks"
		}
	}
	return ""
}

type textObject struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Verbatim bool   `json:"verbatim"`
}

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }
