//go:build n8n

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// slackMessage is one message the fake Slack accepted: posted, or an
// update of an earlier one.
type slackMessage struct {
	Method   string // chat.postMessage or chat.update
	Channel  string
	TS       string // the message's ts (an update's: the message it rewrites)
	ThreadTS string
	Text     string
	Blocks   string
	At       time.Time // when the fake received it
}

// buttons returns the link buttons of the message: text → URL.
func (m slackMessage) buttons() map[string]string {
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type string `json:"type"`
			Text struct {
				Text string `json:"text"`
			} `json:"text"`
			URL string `json:"url"`
		} `json:"elements"`
	}
	json.Unmarshal([]byte(m.Blocks), &blocks)
	out := map[string]string{}
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "button" {
				out[e.Text.Text] = e.URL
			}
		}
	}
	return out
}

// fields returns the message's section fields, "*Label*\nvalue", as
// label → value.
func (m slackMessage) fields() map[string]string {
	var blocks []struct {
		Fields []struct {
			Text string `json:"text"`
		} `json:"fields"`
	}
	json.Unmarshal([]byte(m.Blocks), &blocks)
	out := map[string]string{}
	for _, b := range blocks {
		for _, f := range b.Fields {
			if label, value, ok := strings.Cut(f.Text, "\n"); ok {
				out[strings.Trim(label, "*")] = value
			}
		}
	}
	return out
}

// fakeSlack is Slack's Web API as the service uses it.
type fakeSlack struct {
	*httptest.Server
	mu   sync.Mutex
	msgs []slackMessage
	n    int
}

func newFakeSlack(t *testing.T) *fakeSlack {
	s := &fakeSlack{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	form := map[string]string{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var v map[string]any
		json.NewDecoder(r.Body).Decode(&v)
		for k, x := range v {
			if str, ok := x.(string); ok {
				form[k] = str
			} else {
				b, _ := json.Marshal(x)
				form[k] = string(b)
			}
		}
	} else {
		r.ParseForm()
		for k := range r.Form {
			form[k] = r.Form.Get(k)
		}
	}
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case "chat.postMessage", "chat.update":
		s.n++
		ts := form["ts"]
		if method == "chat.postMessage" {
			ts = fmt.Sprintf("1800000000.%06d", s.n)
		}
		s.msgs = append(s.msgs, slackMessage{Method: method, Channel: form["channel"], TS: ts,
			ThreadTS: form["thread_ts"], Text: form["text"], Blocks: form["blocks"], At: time.Now()})
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": "C0RETRYAUDIT", "ts": ts})
	default: // auth.test and the like
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "user": "retryaudit", "team": "test"})
	}
}

func (s *fakeSlack) reset() {
	s.mu.Lock()
	s.msgs = nil
	s.mu.Unlock()
}

// about returns the messages that name an event (text "source / event id")
// or contain a string, in the order they came.
func (s *fakeSlack) about(needle string) []slackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []slackMessage
	for _, m := range s.msgs {
		if strings.Contains(m.Text, needle) || strings.Contains(m.Blocks, needle) {
			out = append(out, m)
		}
	}
	return out
}

// thread returns the first message about needle and every reply in its thread.
func (s *fakeSlack) thread(needle string) (slackMessage, []slackMessage, bool) {
	first := s.about(needle)
	var root slackMessage
	found := false
	for _, m := range first {
		if m.Method == "chat.postMessage" && m.ThreadTS == "" {
			root, found = m, true
			break
		}
	}
	if !found {
		return root, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var replies []slackMessage
	for _, m := range s.msgs {
		if m.ThreadTS == root.TS {
			replies = append(replies, m)
		}
	}
	return root, replies, true
}
