package notify_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const (
	botToken    = "xoxb-1111-2222-secret-bot-token"
	webhookPath = "/services/T0000/B0000/SeCrEtWeBhOoKpAtH"
)

// call is one request the fake Slack received.
type call struct {
	Method   string // chat.postMessage, chat.update, auth.test, webhook
	Token    string
	Channel  string
	Text     string
	Blocks   string // raw JSON
	ThreadTS string
	TS       string // the message updated, or the one a post created
	OK       bool   // answered with success
}

// fakeSlack records chat.postMessage, chat.update and webhook posts. By
// default it answers ok; fail decides otherwise, call by call.
type fakeSlack struct {
	*httptest.Server
	mu    sync.Mutex
	calls []call
	seq   int
	// fail, when set, may answer instead of the fake: it returns the
	// status, headers and body to send, or status 0 to answer ok.
	fail func(c call) (int, map[string]string, string)
	// gate, when set, holds every request until it is closed.
	gate chan struct{}
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{}
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
	c := call{}
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
		c.Blocks, c.ThreadTS, c.TS = r.Form.Get("blocks"), r.Form.Get("thread_ts"), r.Form.Get("ts")
		if auth := r.Header.Get("Authorization"); c.Token == "" && strings.HasPrefix(auth, "Bearer ") {
			c.Token = strings.TrimPrefix(auth, "Bearer ")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		if status, headers, body := f.fail(c); status != 0 {
			for k, v := range headers {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
			f.calls = append(f.calls, c)
			return
		}
	}
	if c.Method != "webhook" && c.Token != botToken {
		io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
		f.calls = append(f.calls, c)
		return
	}
	c.OK = true
	switch c.Method {
	case "webhook":
		io.WriteString(w, "ok")
	case "chat.postMessage":
		f.seq++
		c.TS = fmt.Sprintf("1700000000.%06d", f.seq)
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Channel, "ts": c.TS})
	case "chat.update":
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Channel, "ts": c.TS, "text": c.Text})
	case "auth.test":
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": "retryaudit", "team": "Shop"})
	default:
		io.WriteString(w, `{"ok":false,"error":"unknown_method"}`)
	}
	f.calls = append(f.calls, c)
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

func (f *fakeSlack) all() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeSlack) setFail(fn func(c call) (int, map[string]string, string)) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}
