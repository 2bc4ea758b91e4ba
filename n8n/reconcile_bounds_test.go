package n8n_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/n8n"
)

// TestReconcileBounds: what one pass keeps, logs and waits for is bounded,
// and the next pass picks up what it left.
func TestReconcileBounds(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()

		t.Run("a pass logs ten new failures one by one, then how many more", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			var logs syncBuffer
			e.r.Log = slog.New(slog.NewTextHandler(&logs, nil))
			e.pass(t)
			for i := range 25 {
				e.fake.addRun(fmt.Sprint(500+i), "webhook", "", "error", t0.Add(time.Duration(i)*time.Second), time.Second)
			}
			e.clock.Advance(3 * time.Minute)
			e.pass(t)
			if got := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); got != 25 {
				t.Errorf("recorded %d of 25", got)
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != 11 || !strings.Contains(logs.String(), "found=25 logged=10") {
				t.Errorf("%d WARN lines, want 10 and one that counts the rest:\n%s", n, logs.String())
			}
		})

		t.Run("a pass keeps 100 failures without a stop time, and counts the rest", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.fake.pageSize = 250
			e.pass(t)
			for i := range 130 {
				id := fmt.Sprint(1000 + i)
				e.fake.addRun(id, "webhook", "", "error", t0.Add(time.Second), time.Second)
				delete(e.fake.executions[id], "stoppedAt") // n8n gives every failure one
			}
			e.clock.Advance(3 * time.Minute)
			e.pass(t)
			if got := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); got != 100 {
				t.Errorf("recorded %d failures without a stop time, want 100", got)
			}
			if got := e.skipped(t, "no_stop_time"); got != 30 {
				t.Errorf("retryaudit_reconcile_skipped_total{reason=no_stop_time} = %v, want 30", got)
			}
		})

		t.Run("a slow n8n ends the pass at its budget, and the next pass reads the window", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t)
			e.fake.addRun("600", "webhook", "", "error", t0.Add(time.Second), time.Second)
			e.fake.mu.Lock()
			e.fake.gate, e.fake.arrived = make(chan struct{}), make(chan string, 10)
			e.fake.mu.Unlock()
			e.r.Budget = 300 * time.Millisecond
			e.clock.Advance(3 * time.Minute)
			start := time.Now()
			err := e.r.Run(ctx) // the list answers; the execution's data never comes
			if took := time.Since(start); took > 2*time.Second || !n8n.IsAPIFailure(err) {
				t.Fatalf("the pass took %s and ended with %v", took, err)
			}
			e.fake.mu.Lock()
			close(e.fake.gate)
			e.fake.gate = nil
			e.fake.mu.Unlock()
			e.clock.Advance(time.Minute)
			e.pass(t)
			if _, ok := errorsOf(t, e.s, audit.N8NErrorReconcile)["600"]; !ok {
				t.Error("600 was not recorded by the pass after the slow one")
			}
		})

		t.Run("a cursor seen before stops the listing, and the window is read again", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t)
			for i := range 6 {
				e.fake.addRun(fmt.Sprint(700+i), "webhook", "", "error", t0.Add(time.Duration(i)*time.Second), time.Second)
			}
			e.fake.mu.Lock()
			e.fake.cursorLoop = true // the second page gives the first page's cursor again
			e.fake.mu.Unlock()
			e.clock.Advance(3 * time.Minute)
			err := e.r.Run(ctx)
			if !errors.Is(err, n8n.ErrEndless) || !strings.Contains(err.Error(), "earlier page again") {
				t.Fatalf("err = %v", err)
			}
			e.fake.mu.Lock()
			e.fake.cursorLoop = false
			e.fake.mu.Unlock()
			e.clock.Advance(time.Minute)
			e.pass(t)
			if got := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); got != 6 {
				t.Errorf("%d of 6 recorded once the listing ended again", got)
			}
		})
	})
}
