package retries_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/retries"
)

// release lets the held retries of a fake n8n answer.
func (f *fakeN8N) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hold != nil {
		close(f.hold)
		f.hold = nil
	}
}

// oneAsync asks for a single retry in the background: a retry wrongly sent
// would wait for the held n8n.
func oneAsync(b *bench, t *testing.T, id string) <-chan error {
	t.Helper()
	v := b.version(t, id)
	done := make(chan error, 1)
	go func() {
		_, err := b.r.One(context.Background(), key(id), v, retries.Who{Name: "carol", Via: "page"})
		done <- err
	}()
	return done
}

// refusedPending waits for a retry's answer, which must be a refusal as
// pending, with n8n asked no more than want times.
func refusedPending(t *testing.T, b *bench, done <-chan error, want int, says string) {
	t.Helper()
	for {
		select {
		case err := <-done:
			rf := refusal(t, err, retries.ReasonPending)
			if rf != nil && !strings.Contains(rf.Message, says) {
				t.Errorf("the refusal %q does not say %q", rf.Message, says)
			}
			if n := b.n8n.totalRetries(); n != want {
				t.Errorf("n8n was asked %d times, want %d", n, want)
			}
			return
		case <-time.After(20 * time.Millisecond):
			if n := b.n8n.totalRetries(); n > want {
				t.Fatalf("n8n was asked to retry %d times while the first retry was still running", n)
			}
		}
	}
}

func TestRetryNeverTwice(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		t.Run("a slow run is not taken over by its own instance, and its retry blocks another", func(t *testing.T) {
			var offset atomic.Int64
			now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			b := newBench(t, dialect, retries.Config{Rate: 6000, InFlight: 1, Owner: "a", Now: now})
			b.entry(t, "e0", "failed")
			b.entry(t, "e1", "failed")
			b.n8n.hold = make(chan struct{}) // n8n's Retry of e0 is slow
			run, err := b.r.Start(ctx, retries.Filter{Source: "shop"}, bob)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.n8n.release(); waitRun(t, b.r, run.ID, retries.Run.Done) })
			waitRun(t, b.r, run.ID, func(r retries.Run) bool { return b.n8n.totalRetries() == 1 })
			offset.Store(int64(6 * time.Minute)) // past any heartbeat, the retry still pending
			if err := b.r.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			run, _ = b.r.Get(ctx, run.ID)
			if run.Counts["unknown"] != 0 || run.Counts["sending"] != 1 {
				t.Errorf("its own live run was taken over: %v", run.Counts)
			}
			refusedPending(t, b, oneAsync(b, t, "e0"), 1, "waiting for its outcome")
		})
		t.Run("a retry of unknown fate, left by a stopped instance, blocks another", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{Rate: 6000, InFlight: 1, Owner: "a"})
			b.entry(t, "e0", "failed")
			b.entry(t, "e1", "failed")
			b.n8n.hold = make(chan struct{})
			actx, stop := context.WithCancel(context.Background())
			b.r.Base(actx)
			run, err := b.r.Start(ctx, retries.Filter{Source: "shop"}, bob)
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, b.r, run.ID, func(r retries.Run) bool { return b.n8n.totalRetries() == 1 })
			later := retries.New(retries.Config{Store: b.st, N8N: b.r.N8NForTest(), Owner: "b", Rate: 6000, InFlight: 1,
				Now: func() time.Time { return time.Now().Add(10 * time.Minute) }})
			lctx, lstop := context.WithCancel(context.Background())
			t.Cleanup(func() { stop(); lstop(); b.n8n.release() })
			later.Base(lctx)
			if err := later.Resume(ctx); err != nil { // b's retries wait for n8n too
				t.Fatal(err)
			}
			waitRun(t, b.r, run.ID, func(r retries.Run) bool { return r.Counts["unknown"] == 1 })
			refusedPending(t, b, oneAsync(b, t, "e0"), b.n8n.totalRetries(), "fate is unknown")
		})
		t.Run("a cancelled run sends nothing more, not even the item it was about to send", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{Rate: 6000, InFlight: 1})
			b.entry(t, "c0", "failed")
			b.entry(t, "c1", "failed")
			b.n8n.hold = make(chan struct{})
			run, err := b.r.Start(ctx, retries.Filter{Source: "shop"}, bob)
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, b.r, run.ID, func(r retries.Run) bool { return b.n8n.totalRetries() == 1 })
			if _, err := b.r.Cancel(ctx, run.ID, retries.Who{Name: "carol", Via: "api"}); err != nil {
				t.Fatal(err)
			}
			b.n8n.release()
			run = waitRun(t, b.r, run.ID, func(r retries.Run) bool { return r.Counts["sending"] == 0 })
			if n := b.n8n.totalRetries(); n != 1 {
				t.Errorf("after the cancel was answered, n8n was asked %d times (want 1): %v", n, run.Counts)
			}
			if run.Counts["cancelled"] != 1 || run.Counts["succeeded"] != 1 {
				t.Errorf("run %s: %v", run.State, run.Counts)
			}
		})
	})
}

func TestPlanBounded(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		b := newBench(t, dialect, retries.Config{PlanFor: 300 * time.Millisecond})
		for _, id := range []string{"p0", "p1", "p2", "p3", "p4", "p5"} {
			b.entry(t, id, "failed")
		}
		b.n8n.mu.Lock()
		b.n8n.slow = make(chan struct{}) // n8n does not answer
		b.n8n.mu.Unlock()
		t.Run("a preview that runs out of time says so", func(t *testing.T) {
			_, err := b.r.Plan(ctx, retries.Filter{Source: "shop"})
			if rf := refusal(t, err, retries.ReasonTimeout); rf != nil && !strings.Contains(rf.Message, "ran out of time") {
				t.Errorf("a preview n8n does not answer: %v", err)
			}
		})
		t.Run("a run whose plan ran out starts nothing", func(t *testing.T) {
			_, err := b.r.Start(ctx, retries.Filter{Source: "shop"}, bob)
			if rf := refusal(t, err, retries.ReasonTimeout); rf != nil && rf.Code() != audit.CodeUnavailable {
				t.Errorf("a run n8n does not answer: %v", err)
			}
			if runs, err := b.r.List(ctx, 10); err != nil || len(runs) != 0 {
				t.Errorf("runs: %v %v", runs, err)
			}
		})
	})
}

func TestOneAnswersWithinTheWriteTimeout(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		b := newBench(t, dialect, retries.Config{AnswerWithin: 100 * time.Millisecond})
		b.entry(t, "w0", "failed")
		b.n8n.onRetry = b.reportAs(t, "shop", "w0")
		b.n8n.hold = make(chan struct{}) // n8n's Retry runs long
		t.Cleanup(b.n8n.release)
		res, err := b.r.One(ctx, key("w0"), b.version(t, "w0"), bob)
		if err != nil || res.State != "sending" || !strings.Contains(res.Message, "waiting for its report") {
			t.Fatalf("a slow retry: %+v %v", res, err)
		}
		// The send goes on (its Retry has reported done already): another
		// is refused.
		_, err = b.r.One(ctx, key("w0"), b.version(t, "w0"), retries.Who{Name: "carol", Via: "page"})
		refusal(t, err, retries.ReasonNotFailed)
		b.n8n.release()
		deadline := time.Now().Add(30 * time.Second)
		for b.event(t, "w0").Status != "done" {
			if time.Now().After(deadline) {
				t.Fatalf("the Retry's report did not settle w0")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n := b.n8n.totalRetries(); n != 1 {
			t.Errorf("n8n was asked %d times, want once", n)
		}
	})
}

func TestOneRecordedPendingBeforeItsLedgerLine(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		b := newBench(t, dialect, retries.Config{})
		holder, v := b.entry(t, "g0", "failed")
		// Another retry of g0 is recorded pending and is about to write its
		// ledger line (version v+1): a retry checked now, at v, is refused.
		db := b.st.DB()
		q, args, err := sqlx.Named(`INSERT INTO retry_items (source, event_id, item, version, execution_id, state, actor,
			via, sent_at, updated_at) VALUES ('shop', 'g0', '', :version, :execution_id, 'sending', 'ann', 'page', :now, :now)`,
			map[string]any{"version": v + 1, "execution_id": holder, "now": time.Now().UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, db.Rebind(q), args...); err != nil {
			t.Fatal(err)
		}
		_, err = b.r.One(ctx, key("g0"), v, bob)
		refusal(t, err, retries.ReasonPending)
		if n := b.n8n.totalRetries(); n != 0 {
			t.Errorf("n8n was asked %d times, want none", n)
		}
		if got := b.version(t, "g0"); got != v {
			t.Errorf("the refused retry wrote the ledger: version %d, want %d", got, v)
		}
	})
}
