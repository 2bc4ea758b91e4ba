package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// alertCount counts the outbox rows of a role (alert, followup, refresh)
// about one kind of alert.
func alertCount(t *testing.T, s *store.Store, role, kind string) int {
	t.Helper()
	var n int
	if err := s.DB().Get(&n, s.DB().Rebind(`SELECT count(*) FROM outbox WHERE kind = ? AND payload LIKE ?`),
		role, `%"kind":"`+kind+`"%`); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStaleDetector(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, ReviewAfter: 15 * time.Minute})
		claimAs := func(event, exec string) {
			if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: exec}); err != nil {
				t.Fatal(err)
			}
		}
		detect := func() int {
			n, err := s.DetectStale(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		claimAs("slow", "1")
		claimAs("quick", "2")
		s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "quick", Outcome: audit.OutcomeDone, ExecutionID: "2"})
		clock.Advance(14 * time.Minute)
		if n := detect(); n != 0 {
			t.Fatalf("%d stale after 14m", n)
		}
		clock.Advance(2 * time.Minute)
		if n := detect(); n != 1 {
			t.Fatalf("%d stale after 16m, want 1", n)
		}
		q, err := s.ReviewQueue(ctx, 10)
		if err != nil || len(q) != 1 || q[0].EventID != "slow" || !strings.Contains(q[0].LastNews, "processing for over 15m") {
			t.Errorf("review queue = %+v, %v", q, err)
		}
		clock.Advance(time.Hour)
		if n := detect(); n != 0 {
			t.Errorf("alerted %d more times about the same entry", n)
		}
		// A new processing period (failed, then reclaimed) is a new entry to watch.
		s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "slow", Outcome: audit.OutcomeFailed, ExecutionID: "1"})
		claimAs("slow", "3")
		clock.Advance(16 * time.Minute)
		if n := detect(); n != 1 {
			t.Errorf("%d alerts for the new processing period, want 1", n)
		}
		if n := alertCount(t, s, audit.RowAlert, audit.AlertStale); n != 1 {
			t.Errorf("%d stale alerts opened a thread, want 1", n)
		}
		if n := alertCount(t, s, audit.RowFollowup, audit.AlertStale); n != 1 {
			t.Errorf("%d stale alerts in the thread, want 1 (the second period's)", n)
		}
	})
}

func TestResolve(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{})
		s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "order-1", ExecutionID: "1"})
		s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "order-1", Outcome: audit.OutcomeUnknown, ExecutionID: "1"})

		t.Run("bad requests name their fields", func(t *testing.T) {
			_, err := s.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "order-1", To: "maybe"})
			var e *audit.Error
			if !errors.As(err, &e) || e.Fields["to"] == "" || e.Fields["note"] == "" || e.Fields["actor"] == "" {
				t.Errorf("err = %v", err)
			}
		})

		t.Run("two people at once: one wins, the other is told who", func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, who := range []string{"alice", "bob"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					to := audit.StatusDone
					if i == 1 {
						to = audit.StatusFailed
					}
					_, errs[i] = s.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "order-1", To: to,
						Actor: who, Note: "checked the CRM", Holder: "1"})
				}()
			}
			wg.Wait()
			wins := 0
			for _, err := range errs {
				if err == nil {
					wins++
					continue
				}
				if audit.ErrorCode(err) != audit.CodeConflict || !strings.Contains(err.Error(), "resolved by") {
					t.Errorf("the loser is told %v", err)
				}
			}
			if wins != 1 {
				t.Errorf("%d winners: %v", wins, errs)
			}
			ev, _ := s.Event(ctx, "shop", "order-1")
			last := ev.History[len(ev.History)-1]
			if last.Kind != audit.KindResolution || last.Actor == "" || last.Message != "checked the CRM" {
				t.Errorf("history ends with %+v", last)
			}
			if ev.NeedsReview {
				t.Error("a resolved entry still needs review")
			}
		})
	})
}
