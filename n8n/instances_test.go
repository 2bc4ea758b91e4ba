package n8n_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/n8n"
)

// TestReconcileInstances: two n8n instances hand out the same execution
// ids. Each instance's reconciler records its own failures under ids
// qualified with the instance, keeps its own marks, and never takes the
// other's execution for its own.
func TestReconcileInstances(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(t0)
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		prod, staging := newFakeN8N(t), newFakeN8N(t)
		reconciler := func(f *fakeN8N, instance string) *n8n.Reconciler {
			return &n8n.Reconciler{Client: n8n.New(f.url(), fakeKey, nil), Store: s, Log: slog.New(slog.DiscardHandler),
				Metrics: metrics.New(), Grace: time.Minute, Lookback: time.Hour, Now: clock.Now, Instance: instance}
		}
		rp, rs := reconciler(prod, audit.DefaultInstance), reconciler(staging, "staging")
		pass := func() {
			t.Helper()
			for _, r := range []*n8n.Reconciler{rp, rs} {
				if err := r.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		}
		pass()
		claim(t, s, "order-7", "7") // the default instance's execution 7
		prod.addRun("7", "webhook", "", "error", t0.Add(10*time.Second), time.Second)
		staging.addRun("7", "webhook", "", "error", t0.Add(20*time.Second), time.Second)
		staging.addRun("8", "retry", "7", "error", t0.Add(30*time.Second), time.Second)
		clock.Advance(3 * time.Minute)
		pass()
		found := errorsOf(t, s, audit.N8NErrorReconcile)
		if len(found) != 3 || found["7"].ID == 0 || found["7@staging"].ID == 0 || found["8@staging"].ID == 0 {
			t.Fatalf("recorded %v, want 7, 7@staging and 8@staging", keys(found))
		}
		if found["8@staging"].RetryOf != "7@staging" {
			t.Errorf("8@staging retries %q, want 7@staging", found["8@staging"].RetryOf)
		}
		if ev, ok := found["7"].Linked(); !ok || ev.EventID != "order-7" {
			t.Errorf("the default instance's 7 is linked to %+v, want order-7", ev)
		}
		for _, id := range []string{"7@staging", "8@staging"} {
			if ev, ok := found[id].Linked(); ok {
				t.Errorf("%s, of another n8n, was linked to %+v: the default instance's 7 claimed it", id, ev)
			}
		}
		for _, key := range []string{"reconcile.stopped_through", "reconcile.stopped_through@staging"} {
			if v, err := s.State(t.Context(), key); err != nil || v == "" {
				t.Errorf("mark %s = %q, %v", key, v, err)
			}
		}
	})
}
