package notify_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/notify"
	"github.com/retryaudit/retryaudit/templates"
)

var links = audit.Links{
	BaseURL:      "https://retryaudit.example",
	N8NEditorURL: "https://n8n.example",
	CRM:          map[string]string{"shop": "https://crm.example.com/orders?external_id={event_id}"},
}

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is a store, a clock and a worker sending to a fake Slack.
type rig struct {
	store  *audit.Store
	clock  *audittest.Clock
	worker *notify.Worker
	slack  *fakeSlack
	logs   *syncBuffer
}

func newRig(t *testing.T, dialect string, webhook bool) *rig {
	t.Helper()
	clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	r := &rig{clock: clock, slack: newFakeSlack(t), logs: &syncBuffer{}}
	r.store = audittest.Open(t, dialect, audit.Options{Now: clock.Now})
	r.worker = r.newWorker(t, r.store, webhook, "worker-1")
	t.Cleanup(func() { checkNoSecrets(t, r) })
	return r
}

func (r *rig) newWorker(t *testing.T, s *audit.Store, webhook bool, owner string) *notify.Worker {
	t.Helper()
	renderer, err := notify.NewRenderer(templates.FS, links, r.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	var n notify.Notifier = notify.NewBot(botToken, "C0ALERTS", r.slack.apiURL())
	if webhook {
		n = notify.NewWebhook(r.slack.webhookURL())
	}
	return &notify.Worker{Store: s, Notifier: n, Renderer: renderer, Owner: owner, Now: r.clock.Now,
		Log:         slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BaseBackoff: time.Second, MaxBackoff: time.Minute, MinInterval: time.Millisecond}
}

// checkNoSecrets fails the test if a token or webhook URL reached a log
// line or a stored error.
func checkNoSecrets(t *testing.T, r *rig) {
	t.Helper()
	var stored []string
	r.store.DB().Select(&stored, `SELECT last_error FROM outbox`)
	for _, text := range append(stored, r.logs.String()) {
		for _, secret := range []string{botToken, "SeCrEtWeBhOoKpAtH"} {
			if strings.Contains(text, secret) {
				t.Errorf("a secret reached the logs or the outbox: %s", text)
			}
		}
	}
}

func (r *rig) drain(t *testing.T) {
	t.Helper()
	if _, err := r.worker.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// unknown claims an event and reports its outcome unknown: the first alert.
func (r *rig) unknown(t *testing.T, event string) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: "4711",
		WorkflowID: "wf1", WorkflowName: "Orders to CRM"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event,
		Outcome: audit.OutcomeUnknown, ExecutionID: "4711", Reason: "timeout after 30s <script>"}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) states(t *testing.T) map[string]int {
	t.Helper()
	var rows []struct {
		State string `db:"state"`
		N     int    `db:"n"`
	}
	if err := r.store.DB().Select(&rows, `SELECT state, count(*) AS n FROM outbox GROUP BY state`); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, row := range rows {
		out[row.State] = row.N
	}
	return out
}

func TestAlertMessage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		r.unknown(t, "order 1042/ü&")
		r.drain(t)
		posts := r.slack.ok()
		if len(posts) != 1 || posts[0].Method != "chat.postMessage" || posts[0].Channel != "C0ALERTS" {
			t.Fatalf("calls = %+v", r.slack.all())
		}
		p := posts[0]
		for _, want := range []string{"shop", "order 1042/ü&amp;"} {
			if !strings.Contains(p.Text, want) {
				t.Errorf("the fallback text %q lacks %q", p.Text, want)
			}
		}
		for _, want := range []string{
			`"url":"https://retryaudit.example/events/shop/order%201042%2F%C3%BC&"`,
			`"url":"https://n8n.example/workflow/wf1/executions/4711"`,
			`"url":"https://crm.example.com/orders?external_id=order+1042%2F%C3%BC%26"`,
			"Event ID*\norder 1042/ü&amp;", "timeout after 30s &lt;script&gt;", "Processing for",
		} {
			if !strings.Contains(unescapeJSON(p.Blocks), want) {
				t.Errorf("the blocks lack %s:\n%s", want, p.Blocks)
			}
		}
		if got := r.states(t); got["sent"] != 1 {
			t.Errorf("states = %v", got)
		}
	})
}

// unescapeJSON undoes the \u0026-style escapes of encoding/json, so that
// tests can look for URLs as people see them.
func unescapeJSON(s string) string {
	return strings.NewReplacer(`\u0026`, "&", `\u003c`, "<", `\u003e`, ">", `\n`, "\n").Replace(s)
}

func TestThreads(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		ctx := context.Background()
		r.unknown(t, "order-1")
		r.drain(t)
		if _, err := r.store.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "order-1",
			To: audit.StatusDone, Actor: "alice", Note: "order 88121 is in the CRM", Holder: "4711"}); err != nil {
			t.Fatal(err)
		}
		r.drain(t)
		calls := r.slack.ok()
		if len(calls) != 3 {
			t.Fatalf("calls = %+v", calls)
		}
		root, reply, update := calls[0], calls[1], calls[2]
		if reply.Method != "chat.postMessage" || reply.ThreadTS != root.TS || !strings.Contains(reply.Text, "alice") {
			t.Errorf("the reply is not in the thread: %+v (root ts %s)", reply, root.TS)
		}
		if update.Method != "chat.update" || update.TS != root.TS || !strings.Contains(update.Blocks, "Resolved: done") ||
			!strings.Contains(update.Blocks, "order 88121 is in the CRM") {
			t.Errorf("the first message was not updated: %+v", update)
		}
	})
}

func TestWebhookMode(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, true)
		r.unknown(t, "order-2")
		r.drain(t)
		if _, err := r.store.ReportOutcome(context.Background(), audit.OutcomeRequest{Source: "shop",
			EventID: "order-2", Outcome: audit.OutcomeDone, ExecutionID: "4711"}); err != nil {
			t.Fatal(err)
		}
		r.drain(t)
		calls := r.slack.ok()
		if len(calls) != 2 || calls[0].Method != "webhook" || calls[1].Method != "webhook" {
			t.Fatalf("calls = %+v", calls)
		}
		if !strings.Contains(calls[1].Text, "order-2") || !strings.Contains(calls[1].Text, "shop") {
			t.Errorf("the news does not name the event: %q", calls[1].Text)
		}
		if got := r.states(t); got["sent"] != 2 || got["skipped"] != 1 {
			t.Errorf("states = %v (the update is skipped)", got)
		}
	})
}

func TestRetries(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		t.Run("a 429 with Retry-After is waited out", func(t *testing.T) {
			r := newRig(t, dialect, false)
			r.slack.setFail(func(c call) (int, map[string]string, string) {
				if len(r.slack.calls) == 0 {
					return 429, map[string]string{"Retry-After": "30"}, ""
				}
				return 0, nil, ""
			})
			r.unknown(t, "order-3")
			r.drain(t)
			r.clock.Advance(29 * time.Second)
			r.drain(t)
			if n := len(r.slack.all()); n != 1 {
				t.Fatalf("%d calls before Retry-After passed", n)
			}
			r.clock.Advance(2 * time.Second)
			r.drain(t)
			if len(r.slack.ok()) != 1 || r.states(t)["sent"] != 1 {
				t.Errorf("calls %+v states %v", r.slack.all(), r.states(t))
			}
		})

		t.Run("500s are retried with growing delays", func(t *testing.T) {
			r := newRig(t, dialect, false)
			failures := 3
			r.slack.setFail(func(c call) (int, map[string]string, string) {
				if failures > 0 {
					failures--
					return 500, nil, "<html>oops</html>"
				}
				return 0, nil, ""
			})
			r.unknown(t, "order-4")
			for i := 0; i < 10 && r.states(t)["sent"] == 0; i++ {
				r.drain(t)
				r.clock.Advance(5 * time.Second)
			}
			if len(r.slack.all()) != 4 || r.states(t)["sent"] != 1 {
				t.Errorf("calls %d, states %v", len(r.slack.all()), r.states(t))
			}
		})

		t.Run("a webhook that cannot be reached is retried, its URL never shown", func(t *testing.T) {
			r := newRig(t, dialect, true)
			r.slack.Close() // nothing listens there any more
			r.unknown(t, "order-w")
			r.drain(t)
			var last string
			r.store.DB().Get(&last, `SELECT last_error FROM outbox`)
			if r.states(t)["pending"] != 1 || last == "" {
				t.Errorf("states %v, last error %q", r.states(t), last)
			}
			if strings.Contains(last, "127.0.0.1") && strings.Contains(last, "/services/") {
				t.Errorf("the stored error shows the URL: %s", last)
			}
		})

		t.Run("invalid_auth dead-letters and is logged once", func(t *testing.T) {
			r := newRig(t, dialect, false)
			r.worker.Notifier = notify.NewBot("xoxb-revoked", "C0ALERTS", r.slack.apiURL())
			r.unknown(t, "order-5")
			r.unknown(t, "order-6")
			r.drain(t)
			if got := r.states(t); got["dead"] != 2 {
				t.Fatalf("states = %v", got)
			}
			var reasons []string
			r.store.DB().Select(&reasons, `SELECT last_error FROM outbox`)
			if !strings.Contains(reasons[0], "invalid_auth") {
				t.Errorf("reason = %v", reasons)
			}
			if n := strings.Count(r.logs.String(), "invalid_auth"); n != 1 {
				t.Errorf("invalid_auth logged %d times", n)
			}
		})
	})
}

// TestSlackOutage: Slack is down for a while, then back: every alert goes
// out once, and each event's messages go out in their order.
func TestSlackOutage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		ctx := context.Background()
		down := true
		r.slack.setFail(func(c call) (int, map[string]string, string) {
			if down {
				return 503, nil, "down"
			}
			return 0, nil, ""
		})
		events := []string{"order-a", "order-b", "order-c"}
		for _, ev := range events {
			r.unknown(t, ev)
			r.store.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: "4712", RetryOf: "4711"})
			r.store.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: ev, Outcome: audit.OutcomeDone,
				ExecutionID: "4711"})
		}
		for i := 0; i < 5; i++ {
			r.drain(t)
			r.clock.Advance(10 * time.Second)
		}
		if n := len(r.slack.ok()); n != 0 {
			t.Fatalf("%d messages went out while Slack was down", n)
		}
		down = false
		for i := 0; i < 30 && r.states(t)["pending"]+r.states(t)["sending"] > 0; i++ {
			r.clock.Advance(time.Minute)
			r.drain(t)
		}
		var skipped int
		r.store.DB().Get(&skipped, `SELECT count(*) FROM outbox WHERE state = 'skipped' AND kind <> 'refresh'`)
		if skipped != 0 {
			t.Errorf("%d messages skipped (only superseded updates may be)", skipped)
		}
		var rows []audit.OutboxRow
		r.store.DB().Select(&rows, `SELECT id, thread_key, kind, state, ts FROM outbox WHERE state = 'sent' ORDER BY id`)
		ok := r.slack.ok()
		if len(ok) != len(rows) {
			t.Fatalf("%d successful calls for %d rows", len(ok), len(rows))
		}
		for _, ev := range events {
			var want, got []string
			for _, row := range rows {
				if row.ThreadKey == audit.EventThread("shop", ev) {
					want = append(want, row.Kind)
				}
			}
			rootTS := ""
			for _, c := range ok {
				switch {
				case c.Method == "chat.postMessage" && c.ThreadTS == "" && strings.Contains(c.Text, ev):
					rootTS = c.TS
					got = append(got, "alert")
				case rootTS != "" && c.ThreadTS == rootTS:
					got = append(got, "followup")
				case rootTS != "" && c.Method == "chat.update" && c.TS == rootTS:
					got = append(got, "refresh")
				}
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("%s: sent %v, want %v", ev, got, want)
			}
		}
	})
}

// TestRestart: rows pending when the process stops, and a row a dead worker
// leased, are sent after a restart.
func TestRestart(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
		url := audittest.URL(t, dialect)
		first := audittest.OpenURL(t, audit.Options{URL: url, Now: clock.Now})
		r := &rig{store: first, clock: clock, slack: newFakeSlack(t), logs: &syncBuffer{}}
		r.unknown(t, "order-r1")
		r.unknown(t, "order-r2")
		if rows, err := first.LeaseOutbox(context.Background(), "crashed-worker", time.Minute, 1); err != nil || len(rows) != 1 {
			t.Fatalf("lease: %v %v", rows, err)
		}
		first.Close()

		second := audittest.OpenURL(t, audit.Options{URL: url, Now: clock.Now})
		r.store = second
		r.worker = r.newWorker(t, second, false, "worker-after-restart")
		r.drain(t)
		if n := len(r.slack.ok()); n != 1 {
			t.Fatalf("%d sent before the dead worker's lease ran out, want 1", n)
		}
		clock.Advance(2 * time.Minute)
		r.drain(t)
		if n := len(r.slack.ok()); n != 2 {
			t.Errorf("%d sent after the lease ran out, want 2", n)
		}
	})
}

// TestTwoWorkers runs two workers, each with its own connection pool, on one
// database: no row is sent twice.
func TestTwoWorkers(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
		url := audittest.URL(t, dialect)
		a := audittest.OpenURL(t, audit.Options{URL: url, Now: clock.Now})
		b := audittest.OpenURL(t, audit.Options{URL: url, Now: clock.Now})
		r := &rig{store: a, clock: clock, slack: newFakeSlack(t), logs: &syncBuffer{}}
		const events = 40
		for i := 0; i < events; i++ {
			r.unknown(t, fmt.Sprintf("order-%02d", i))
		}
		workers := []*notify.Worker{r.newWorker(t, a, false, "w1"), r.newWorker(t, b, false, "w2")}
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := w.Drain(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		seen := map[string]int{}
		for _, c := range r.slack.ok() {
			seen[c.Text]++
		}
		if len(r.slack.ok()) != events || len(seen) != events {
			t.Errorf("%d messages, %d distinct, for %d alerts", len(r.slack.ok()), len(seen), events)
		}
		for text, n := range seen {
			if n > 1 {
				t.Errorf("sent %d times: %s", n, text)
			}
		}
	})
}

func TestNotConfigured(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r := newRig(t, dialect, false)
		r.worker.Notifier = nil
		r.unknown(t, "order-7")
		r.drain(t)
		var last string
		r.store.DB().Get(&last, `SELECT last_error FROM outbox`)
		if got := r.states(t); got["unconfigured"] != 1 || last != notify.NotConfigured {
			t.Errorf("states %v, last_error %q", got, last)
		}
	})
}

func TestRendererRefusesABrokenTemplate(t *testing.T) {
	broken := fstest.MapFS{"slack/alert.json.tmpl": {Data: []byte(
		`{{define "headline"}}x{{end}}{{define "text"}}t{{end}}{{define "blocks"}}[{"type":}]{{end}}`)}}
	if _, err := notify.NewRenderer(broken, links, nil); err == nil || !strings.Contains(err.Error(), "Block Kit") {
		t.Errorf("err = %v", err)
	}
}
