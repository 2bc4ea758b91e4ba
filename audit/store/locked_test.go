package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// holdRow locks an entry's row from a connection of its own, as n8n's
// Postgres node may, until the test ends or release is called.
func holdRow(t *testing.T, s *store.Store, source, eventID string) (release func()) {
	t.Helper()
	other, err := sqlx.Open("postgres", s.Where()) // Where hides a password: the test database has none
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tx, err := other.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Exec(`SELECT 1 FROM webhook_events WHERE source = $1 AND event_id = $2 FOR UPDATE`, source, eventID); err != nil {
		t.Fatal(err)
	}
	return func() { tx.Rollback() }
}

// TestBatchSetsAsideLockedRows: on PostgreSQL, with the production lock
// timeout and queue wait, a claim or an outcome report of an entry whose
// row another session holds is set aside, tried again in later batches for
// the queue wait, then answered busy (ErrLocked): never after the
// lock timeout. The claims batched with it are decided as usual. SQLite has
// no row locks (one writer): there is nothing to set aside.
func TestBatchSetsAsideLockedRows(t *testing.T) {
	ctx := context.Background()
	s := audittest.Open(t, "postgres", store.Options{LockTimeout: store.DefaultLockTimeout,
		Batching: store.Batching{Wait: store.DefaultQueueWait}})
	if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "locked", ExecutionID: "1"}); err != nil {
		t.Fatal(err)
	}
	release := holdRow(t, s, "shop", "locked")

	start := time.Now()
	res, errs := s.ClaimTogether(ctx, []audit.ClaimRequest{
		{Source: "shop", EventID: "free-1", ExecutionID: "2"},
		{Source: "shop", EventID: "locked", ExecutionID: "3"},
		{Source: "shop", EventID: "locked", ExecutionID: "4"},
		{Source: "shop", EventID: "free-2", ExecutionID: "5"},
	})
	took := time.Since(start) // the locked entry's answers come last
	for _, i := range []int{1, 2} {
		if audit.ErrorCode(errs[i]) != audit.CodeBusy || !errors.Is(errs[i], audit.ErrLocked) {
			t.Errorf("claim %d of the locked entry: %+v, %v", i, res[i], errs[i])
		}
	}
	for _, i := range []int{0, 3} {
		if errs[i] != nil || res[i].Decision != audit.DecisionClaimed {
			t.Errorf("claim %d beside it: %+v, %v", i, res[i], errs[i])
		}
	}
	if took >= store.DefaultLockTimeout {
		t.Errorf("the batch took %s: it waited for the lock (timeout %s)", took, store.DefaultLockTimeout)
	}

	start = time.Now()
	_, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "locked", ExecutionID: "1", Outcome: audit.OutcomeDone})
	if !errors.Is(err, audit.ErrLocked) || time.Since(start) >= store.DefaultLockTimeout {
		t.Errorf("an outcome of the locked entry: %v after %s", err, time.Since(start))
	}

	release()
	if r, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "locked", ExecutionID: "6"}); err != nil ||
		r.Decision != audit.DecisionInProgress || r.HolderExecutionID != "1" || r.Deliveries != 2 {
		t.Errorf("once the lock is gone: %+v, %v (nothing was recorded while it was held)", r, err)
	}
}

// TestBatchesOfOneEntryWaitForEachOther: the group commit's workers, and
// claims and outcomes, never take each other's row locks for another
// session's: many claims and reports of one entry at once are all decided,
// none answered unavailable.
func TestBatchesOfOneEntryWaitForEachOther(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{Batching: store.Batching{MaxBatch: 4}})
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "hot", ExecutionID: "1"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 400)
		for i := range 200 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "hot", ExecutionID: fmt.Sprint(100 + i)})
				errs <- err
			}()
			go func() {
				defer wg.Done()
				_, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "hot",
					ExecutionID: fmt.Sprint(100 + i), Outcome: audit.OutcomeDone})
				if audit.ErrorCode(err) == audit.CodeNotHolder {
					err = nil
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// TestSetAsideKeepsArrivalOrder: claims of an entry whose row another
// session holds are decided in the order they came once it is free: of
// two redeliveries of a failed entry, the first reclaims it, every time.
func TestSetAsideKeepsArrivalOrder(t *testing.T) {
	ctx := context.Background()
	s := audittest.Open(t, "postgres", store.Options{Batching: store.Batching{Wait: store.DefaultQueueWait}})
	for round := range 20 {
		ev := fmt.Sprint("ordered-", round)
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: ev + "-1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: ev, ExecutionID: ev + "-1",
			Outcome: audit.OutcomeFailed}); err != nil {
			t.Fatal(err)
		}
		release := holdRow(t, s, "shop", ev)
		var wg sync.WaitGroup
		res := make([]audit.ClaimResult, 2)
		errs := make([]error, 2)
		for i, exec := range []string{ev + "-first", ev + "-second"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], errs[i] = s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: ev, ExecutionID: exec})
			}()
			time.Sleep(20 * time.Millisecond) // the first is set aside before the second comes
		}
		time.Sleep(20 * time.Millisecond)
		release()
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || res[0].Decision != audit.DecisionReclaimed || res[1].Process {
			t.Errorf("round %d: the first %+v (%v), the second %+v (%v); want the first to reclaim", round,
				res[0], errs[0], res[1], errs[1])
		}
	}
}
