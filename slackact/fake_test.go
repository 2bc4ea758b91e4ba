package slackact_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const (
	botToken = "xoxb-1111-2222-secret-bot-token"
	appToken = "xapp-1-A111-secret-app-token"
	secret   = "8f742231b10e8888abcd99yyyzzz85a5"
)

// posted is one call the fake Slack took.
type posted struct {
	Method  string
	Channel string
	User    string
	Text    string
	Blocks  string
	TS      string
}

// fakeSlack is Slack's Web API as retryaudit uses it for alerts and their
// buttons (chat.postMessage, chat.update, chat.postEphemeral), and Socket
// Mode's apps.connections.open with its WebSocket: a test sends an
// envelope over the connection and reads the acknowledgements.
type fakeSlack struct {
	*httptest.Server
	mu    sync.Mutex
	calls []posted
	seq   int

	conns chan *websocket.Conn
	acks  chan string
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{conns: make(chan *websocket.Conn, 4), acks: make(chan string, 16)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSlack) apiURL() string { return f.URL + "/api/" }

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/socket" {
		f.socket(w, r)
		return
	}
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	auth := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	if method == "apps.connections.open" {
		if auth != appToken {
			w.Write([]byte(`{"ok":false,"error":"invalid_auth"}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(f.URL, "http") + "/socket"})
		return
	}
	if auth != botToken && r.Form.Get("token") != botToken {
		w.Write([]byte(`{"ok":false,"error":"invalid_auth"}`))
		return
	}
	c := posted{Method: method, Channel: r.Form.Get("channel"), User: r.Form.Get("user"), Text: r.Form.Get("text"),
		Blocks: r.Form.Get("blocks"), TS: r.Form.Get("ts")}
	f.mu.Lock()
	if method == "chat.postMessage" {
		f.seq++
		c.TS = "1700000000." + strconv.Itoa(100000+f.seq)
	}
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Channel, "ts": c.TS, "message_ts": c.TS})
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// socket is the Socket Mode connection: it says hello, hands the
// connection to the test, and passes on every acknowledgement's envelope.
func (f *fakeSlack) socket(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": "A111"}})
	f.conns <- conn
	for {
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err := conn.ReadJSON(&ack); err != nil {
			return
		}
		f.acks <- ack.EnvelopeID
	}
}

// of returns the calls of a method so far.
func (f *fakeSlack) of(method string) []posted {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []posted
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// waitFor waits until the fake has n calls of a method.
func (f *fakeSlack) waitFor(t *testing.T, method string, n int) []posted {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f.of(method)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s called %d times, want %d", method, len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
