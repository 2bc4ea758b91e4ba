package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// slackCounter is a fake Slack Web API that counts what it accepted.
type slackCounter struct {
	mu    sync.Mutex
	posts map[string]int // text → times posted
	calls int
}

func (f *slackCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat.postMessage"), strings.HasSuffix(r.URL.Path, "/chat.update"):
		key := r.URL.Path + " " + r.Form.Get("thread_ts") + r.Form.Get("ts") + " " + r.Form.Get("text")
		f.posts[key]++
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C1", "ts": fmt.Sprintf("1700000000.%06d", f.calls)})
	default:
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": "bot", "team": "t"})
	}
}

// TestTwoInstances runs two instances on one PostgreSQL database under
// concurrent claims and errors: no key is processed twice, no alert is sent
// twice.
func TestTwoInstances(t *testing.T) {
	url := audittest.URL(t, "postgres")
	slack := &slackCounter{posts: map[string]int{}}
	fake := httptest.NewServer(slack)
	defer fake.Close()
	env := map[string]string{"RETRYAUDIT_DATABASE_URL": url, "RETRYAUDIT_TOKEN": tok("shared-token"),
		"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-test", "RETRYAUDIT_SLACK_CHANNEL": "C1", "RETRYAUDIT_SLACK_API_URL": fake.URL}
	a, b := startService(t, env), startService(t, env)
	instances := []*service{a, b}

	const keys, deliveries = 20, 10
	var mu sync.Mutex
	processed := map[string]int{}
	var wg sync.WaitGroup
	for k := 0; k < keys; k++ {
		for d := 0; d < deliveries; d++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				svc := instances[(k+d)%2]
				event, exec := fmt.Sprintf("order-%d", k), fmt.Sprintf("%d%02d", k+1, d)
				code, body := svc.api(t, "POST", "/v1/claims",
					fmt.Sprintf(`{"source":"shop","event_id":%q,"execution_id":%q,"workflow_id":"wf1"}`, event, exec))
				if code != http.StatusOK {
					t.Errorf("claim: %d %s", code, body)
					return
				}
				if strings.Contains(body, `"process":true`) {
					mu.Lock()
					processed[event]++
					mu.Unlock()
				}
				if k >= 6 || !strings.Contains(body, `"process":true`) {
					return
				}
				// The acting run of six events fails after its claim: n8n
				// reports it, to either instance. (Only an acting run's error
				// alerts: one told in_progress did nothing. Alerts go out at
				// one per second per instance, so they are fewer than claims.)
				code, body = instances[(k+d+1)%2].api(t, "POST", "/v1/n8n/errors", fmt.Sprintf(
					`{"execution":{"id":%q,"mode":"webhook","lastNodeExecuted":"CRM","error":{"message":"timeout"}},"workflow":{"id":"wf"}}`, exec))
				if code != http.StatusAccepted && code != http.StatusOK {
					t.Errorf("error intake: %d %s", code, body)
				}
			}()
		}
	}
	wg.Wait()
	for k := 0; k < keys; k++ {
		if n := processed[fmt.Sprintf("order-%d", k)]; n != 1 {
			t.Errorf("order-%d processed %d times", k, n)
		}
	}

	db, err := sqlx.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	var open, sent int
	for time.Now().Before(deadline) {
		db.Get(&open, `SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')`)
		if open == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	db.Get(&sent, `SELECT count(*) FROM outbox WHERE state = 'sent'`)
	if open != 0 || sent == 0 {
		t.Fatalf("outbox: %d still open, %d sent", open, sent)
	}
	slack.mu.Lock()
	defer slack.mu.Unlock()
	accepted := 0
	for text, n := range slack.posts {
		accepted += n
		if n > 1 && !strings.Contains(text, "chat.update") { // an update may repeat, a message may not
			t.Errorf("sent %d times: %s", n, text)
		}
	}
	if accepted != sent {
		t.Errorf("Slack accepted %d messages for %d sent rows", accepted, sent)
	}
}

// TestSQLiteSecondInstance: a second serve on the same SQLite file refuses
// to start and says why.
func TestSQLiteSecondInstance(t *testing.T) {
	dir := t.TempDir()
	startService(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir})
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := map[string]string{"RETRYAUDIT_DATA_DIR": dir, "RETRYAUDIT_ADDR": "127.0.0.1:0"}
	err := run(ctx, []string{"serve"}, func(k string) string { return env[k] }, &out)
	if err == nil || !strings.Contains(err.Error(), "another retryaudit process is serving") {
		t.Errorf("the second instance: %v\n%s", err, out.String())
	}
}
