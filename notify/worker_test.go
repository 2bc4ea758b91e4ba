package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/notify"
)

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
			"Event ID*\norder 1042/ü&amp;", `{"type":"plain_text","text":"unknown by 4711: timeout after 30s <script>"`, "Processing for",
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
				if failures > 0 && c.Method == "chat.postMessage" {
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
			posts, lookups := 0, 0
			for _, c := range r.slack.all() {
				switch c.Method {
				case "chat.postMessage":
					posts++
				case "conversations.history":
					lookups++
				}
			}
			// A 500 may come after Slack posted: each retry looks first.
			if posts != 4 || lookups != 3 || r.states(t)["sent"] != 1 || len(r.slack.stored()) != 1 {
				t.Errorf("%d posts, %d lookups, states %v", posts, lookups, r.states(t))
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
			r.worker.Notifier = r.bot("xoxb-revoked")
			r.unknown(t, "order-5")
			r.unknown(t, "order-6")
			r.drain(t)
			if got := r.states(t); got["dead"] != 2 {
				t.Fatalf("states = %v", got)
			}
			var reasons []string
			r.store.DB().Select(&reasons, `SELECT last_error FROM outbox`)
			if !strings.HasPrefix(reasons[0], audit.DeadConfigPrefix) || !strings.Contains(reasons[0], "invalid_auth") {
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
		var rows []struct {
			ID        int64  `db:"id"`
			ThreadKey string `db:"thread_key"`
			Kind      string `db:"kind"`
			State     string `db:"state"`
			TS        string `db:"ts"`
		}
		if err := r.store.DB().Select(&rows, `SELECT id, thread_key, kind, state, ts FROM outbox WHERE state = 'sent' ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		var ok []call
		for _, c := range r.slack.ok() {
			if c.Method == "chat.postMessage" || c.Method == "chat.update" {
				ok = append(ok, c)
			}
		}
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
// leased, are sent after a restart; the dead worker's row is looked for in
// the channel's history first (it may have posted it), and its name is kept.
func TestRestart(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r, url := newRigURL(t, dialect)
		first := r.store
		r.unknown(t, "order-r1")
		r.unknown(t, "order-r2")
		if rows, err := first.LeaseOutbox(context.Background(), "crashed-worker", time.Minute, 1); err != nil || len(rows) != 1 {
			t.Fatalf("lease: %v %v", rows, err)
		}
		first.Close()

		second := r.instance(t, url)
		r.store = second
		r.worker = r.newWorker(t, second, false, "worker-after-restart")
		r.drain(t)
		if n := len(r.slack.posts()); n != 1 {
			t.Fatalf("%d sent before the dead worker's lease ran out, want 1", n)
		}
		r.clock.Advance(2 * time.Minute)
		rows, err := second.LeaseOutbox(context.Background(), "peek", time.Millisecond, 1)
		if err != nil || len(rows) != 1 || !rows[0].MaybeSent || rows[0].AttemptedBy != "crashed-worker" {
			t.Fatalf("the row taken over: %+v %v", rows, err)
		}
		r.clock.Advance(time.Second) // the peek's lease runs out
		r.drain(t)
		if n := len(r.slack.posts()); n != 2 {
			t.Errorf("%d sent after the lease ran out, want 2", n)
		}
		lookups := 0
		for _, c := range r.slack.all() {
			if c.Method == "conversations.history" {
				lookups++
			}
		}
		if lookups != 1 {
			t.Errorf("%d history lookups, want 1 (for the row the dead worker held)", lookups)
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
