package notify_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/notify"
)

// running starts workers with Run and returns a function that stops them
// the way SIGTERM stops serve (the context ends) and waits until they
// returned.
func running(t *testing.T, workers ...*notify.Worker) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(ctx)
		}()
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds or limit passes; limit comes from the
// work the test asks for (so many sends of so long), not from a guess.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postsByText counts the messages the fake's channels hold, by text.
func postsByText(f *fakeSlack) map[string]int {
	seen := map[string]int{}
	for _, m := range f.stored() {
		seen[m.Text]++
	}
	return seen
}

// TestExactlyOnce: two instances with two workers each, and a Slack that
// answers just under the client's timeout. The lease is shorter than one
// send, so only its renewal keeps a second worker from taking a row over:
// every alert is posted exactly once, and no lease runs out.
func TestExactlyOnce(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r, url := newRigURL(t, dialect)
		r.timeout = 2 * time.Second
		slow := r.timeout * 9 / 10
		r.slack.setDelay(func(c call) time.Duration {
			if c.Method == "chat.postMessage" {
				return slow
			}
			return 0
		})
		const alerts = 12
		for i := range alerts {
			r.unknown(t, fmt.Sprintf("order-%02d", i))
		}
		b := r.instance(t, url)
		var workers []*notify.Worker
		for i, s := range []*store.Store{r.store, r.store, b, b} {
			w := r.newWorker(t, s, false, fmt.Sprintf("instance-%d/worker-%d", i/2+1, i%2+1))
			w.Lease = slow * 3 / 4 // shorter than a send: it must be renewed
			workers = append(workers, w)
		}
		stop := running(t, workers...)
		// Four workers in parallel, each send as slow as allowed.
		waitFor(t, alerts*(slow+r.timeout), "every alert is sent", func() bool { return r.open(t) == 0 })
		stop()

		seen := postsByText(r.slack)
		if len(r.slack.stored()) != alerts || len(seen) != alerts {
			t.Errorf("%d messages, %d distinct, for %d alerts", len(r.slack.stored()), len(seen), alerts)
		}
		for text, n := range seen {
			if n > 1 {
				t.Errorf("posted %d times: %s", n, text)
			}
		}
		if got := r.states(t); got["sent"] != alerts {
			t.Errorf("states = %v", got)
		}
		for _, bad := range []string{"lease ran out", "took the row over", "cannot renew"} {
			if strings.Contains(r.logs.String(), bad) {
				t.Errorf("the log says %q:\n%s", bad, r.logs.String())
			}
		}
		var owners []string
		r.store.DB().Select(&owners, `SELECT DISTINCT attempted_by FROM outbox`)
		if len(owners) < 2 {
			t.Errorf("only %v attempted rows: the test did not run workers side by side", owners)
		}
	})
}

// TestHangThenAnswer: Slack keeps the message but answers after the
// client gave up. With the history scope the next attempt finds it and
// records it (thread included); without, it posts again and says once
// that a duplicate is possible.
func TestHangThenAnswer(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		// hangFirst makes the first n calls of method answer a second after
		// the client's timeout; Slack keeps what they posted.
		hangFirst := func(r *rig, method string, n int32) {
			var hung atomic.Int32
			r.slack.setDelay(func(c call) time.Duration {
				if c.Method == method && hung.Add(1) <= n {
					return r.timeout + time.Second
				}
				return 0
			})
		}
		newHangRig := func(t *testing.T) *rig {
			r := newRig(t, dialect, false)
			r.timeout = 500 * time.Millisecond
			r.worker = r.newWorker(t, r.store, false, "worker-1")
			return r
		}

		t.Run("with the history scope, one message", func(t *testing.T) {
			r := newHangRig(t)
			hangFirst(r, "chat.postMessage", 1)
			r.unknown(t, "order-h1")
			r.drain(t)
			var row struct {
				ID        int64  `db:"id"`
				State     string `db:"state"`
				MaybeSent bool   `db:"maybe_sent"`
			}
			if err := r.store.DB().Get(&row, `SELECT id, state, maybe_sent FROM outbox`); err != nil {
				t.Fatal(err)
			}
			if row.State != audit.OutboxPending || !row.MaybeSent {
				t.Fatalf("after the timeout: %+v", row)
			}
			r.drainUntil(t, 5*time.Second, 10)
			stored := r.slack.stored()
			if len(stored) != 1 {
				t.Fatalf("%d messages in the channel, want 1", len(stored))
			}
			var ts string
			r.store.DB().Get(&ts, `SELECT ts FROM slack_threads`)
			if ts != stored[0].TS {
				t.Errorf("the thread is %q, the message %q", ts, stored[0].TS)
			}
			// The thread works: a resolution replies in it.
			hangFirst(r, "chat.postMessage", 1) // and the reply hangs too
			if _, err := r.store.Resolve(context.Background(), audit.ResolveRequest{Source: "shop", EventID: "order-h1",
				To: audit.StatusDone, Actor: "alice", Note: "in the CRM", Holder: "4711"}); err != nil {
				t.Fatal(err)
			}
			r.drainUntil(t, 5*time.Second, 10)
			var replies int
			for _, m := range r.slack.stored() {
				if m.ThreadTS == ts {
					replies++
				}
			}
			if replies != 1 {
				t.Errorf("%d replies in the thread, want 1", replies)
			}
			lookups := map[string]int{}
			for _, c := range r.slack.all() {
				lookups[c.Method]++
			}
			if lookups["conversations.history"] != 1 || lookups["conversations.replies"] != 1 {
				t.Errorf("calls = %v", lookups)
			}
		})

		t.Run("without it, posted again with one warning", func(t *testing.T) {
			r := newHangRig(t)
			r.slack.setScopes("chat:write")
			hangFirst(r, "chat.postMessage", 2)
			r.unknown(t, "order-h2")
			r.unknown(t, "order-h3")
			r.drainUntil(t, 5*time.Second, 10)
			if n := len(r.slack.stored()); n != 4 {
				t.Errorf("%d messages, want 4 (each alert twice)", n)
			}
			if n := strings.Count(r.logs.String(), "a duplicate is possible"); n != 1 {
				t.Errorf("the warning is logged %d times", n)
			}
		})
	})
}

// TestStopMidBatch: the stop comes while a message is on its way to Slack.
// That message is finished and recorded, the rows never attempted are given
// back untouched, nothing stays leased, and after the restart every alert
// has been posted exactly once.
func TestStopMidBatch(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		r, url := newRigURL(t, dialect)
		const alerts = 8
		for i := range alerts {
			r.unknown(t, fmt.Sprintf("order-%02d", i))
		}
		inFlight := make(chan struct{})
		var once sync.Once
		posts := 0
		r.slack.setDelay(func(c call) time.Duration {
			if c.Method != "chat.postMessage" {
				return 0
			}
			r.slack.mu.Lock()
			posts++
			third := posts == 3
			r.slack.mu.Unlock()
			if third {
				once.Do(func() { close(inFlight) })
			}
			return 300 * time.Millisecond
		})
		b := r.instance(t, url)
		workers := []*notify.Worker{r.newWorker(t, r.store, false, "a/1"), r.newWorker(t, r.store, false, "a/2"),
			r.newWorker(t, b, false, "b/1")}
		for _, w := range workers {
			w.MinInterval = 100 * time.Millisecond // some wait for the channel when the stop comes
		}
		stop := running(t, workers...)
		select {
		case <-inFlight:
		case <-time.After(alerts * 10 * time.Second):
			t.Fatal("the third post never came")
		}
		stop()

		st := r.states(t)
		if st["sending"] != 0 {
			t.Errorf("%d rows still leased after the stop", st["sending"])
		}
		if got := len(r.slack.stored()); got != st["sent"] || got < 3 {
			t.Errorf("%d messages in Slack, %d rows sent (the one in flight must be recorded)", got, st["sent"])
		}
		var touched int
		r.store.DB().Get(&touched, `SELECT count(*) FROM outbox WHERE state = 'pending'
			AND (attempts <> 0 OR first_attempt_at IS NOT NULL OR maybe_sent OR lease_owner <> '')`)
		if touched != 0 {
			t.Errorf("%d rows given back are marked attempted", touched)
		}
		if st["pending"] == 0 {
			t.Errorf("states %v: the stop came after the batch, not during it", st)
		}

		r.slack.setDelay(nil)
		restarted := running(t, r.newWorker(t, b, false, "after-restart"))
		waitFor(t, alerts*5*time.Second, "the rest is sent", func() bool { return r.open(t) == 0 })
		restarted()
		seen := postsByText(r.slack)
		if len(r.slack.stored()) != alerts || len(seen) != alerts {
			t.Errorf("%d messages, %d distinct, for %d alerts", len(r.slack.stored()), len(seen), alerts)
		}
	})
}
