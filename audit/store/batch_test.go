package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestBatchNeighbours: claims refused for what they ask do not fail the
// claims they share a batch with, and write nothing.
func TestBatchNeighbours(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{})
		for _, req := range []audit.ClaimRequest{
			{Source: "shop", EventID: "known", ExecutionID: "30", WorkflowID: "wf1"},
			{Source: "shop", EventID: "batch", ExecutionID: "40", Items: []string{"line-1"}},
		} {
			if _, err := s.Claim(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		reqs := []audit.ClaimRequest{
			{Source: "shop", EventID: "n1", ExecutionID: "50"},
			{Source: "shop", EventID: "n2", ExecutionID: "30", WorkflowID: "wf-other"}, // another n8n's 30
			{Source: "shop", EventID: "batch", ExecutionID: "51"},                      // items, claimed without
			{Source: "shop", EventID: "n3", ExecutionID: "", WorkflowID: "wf1"},        // invalid
			{Source: "shop", EventID: "n4", ExecutionID: "52"},
		}
		res, errs := s.ClaimTogether(ctx, reqs)
		want := []audit.Code{"", audit.CodeConflict, audit.CodeConflict, audit.CodeInvalid, ""}
		for i := range reqs {
			if errs[i] == nil && want[i] != "" || errs[i] != nil && audit.ErrorCode(errs[i]) != want[i] {
				t.Errorf("claim %d: %v, want %q", i, errs[i], want[i])
			}
			if want[i] == "" && res[i].Decision != audit.DecisionClaimed {
				t.Errorf("claim %d: %+v, want claimed", i, res[i])
			}
		}
		for _, ev := range []string{"n2", "n3"} {
			if _, err := s.Event(ctx, "shop", ev); audit.ErrorCode(err) != audit.CodeNotFound {
				t.Errorf("a refused claim wrote %s: %v", ev, err)
			}
		}
		if d, _ := s.Event(ctx, "shop", "batch"); d.Deliveries != 1 {
			t.Errorf("the refused claim counted a delivery: %d", d.Deliveries)
		}
	})
}

// retryOf is an n8n that knows one Retry.
type retryOf struct{ retry, of string }

func (r retryOf) Execution(_ context.Context, id string) (audit.N8NExecution, error) {
	if id == r.retry {
		return audit.N8NExecution{ID: id, Mode: "retry", RetryOf: r.of}, nil
	}
	return audit.N8NExecution{ID: id, Mode: "webhook"}, nil
}

// TestBatchAsksLineageOfTheHolderItMeets is the schedule the model-based
// test found: a claim and a Retry of it arrive in one batch; the Retry's
// lineage was asked of n8n before the batch, when nobody held the event.
// One by one, the Retry is held; so it must be in a batch.
func TestBatchAsksLineageOfTheHolderItMeets(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{Lookup: retryOf{"61", "60"}})
		res, errs := s.ClaimTogether(ctx, []audit.ClaimRequest{
			{Source: "shop", EventID: "r", ExecutionID: "60"},
			{Source: "shop", EventID: "r", ExecutionID: "61"},
		})
		if errs[0] != nil || errs[1] != nil || res[0].Decision != audit.DecisionClaimed ||
			res[1].Decision != audit.DecisionHeld || res[1].Delivery != audit.DeliveryManualRetry {
			t.Errorf("answers %+v %+v (%v %v)", res[0], res[1], errs[0], errs[1])
		}
	})
}

// TestShedding: past the queue's wait a claim is answered busy at
// once, not after the caller's own timeout.
func TestShedding(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{Batching: store.Batching{Wait: time.Millisecond, MaxBatch: 1,
			Queue: 8}})
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[audit.Code]int{}
		start := time.Now()
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: fmt.Sprint("shed-", i), ExecutionID: fmt.Sprint(i)})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					codes[""]++
				} else {
					codes[audit.ErrorCode(err)]++
				}
			}()
		}
		wg.Wait()
		if codes[audit.CodeBusy] == 0 || codes[""]+codes[audit.CodeBusy] != 200 {
			t.Errorf("answers %v after %s: want some shed (busy), the rest claimed, nothing else", codes, time.Since(start))
		}
	})
}

// TestOneExecutionIDTwoWorkflowsInABatch: one batch holds execution 7 of
// two workflows claiming two keys. One by one, the later is refused: it is
// not the execution 7 the service just saw. The batch answers the same, so
// that no execution is told to act that could never report, even when it
// would decide the later first (its event's first claim beside the other's
// second, as the model test found).
func TestOneExecutionIDTwoWorkflowsInABatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reqs    []audit.ClaimRequest
		refused int
	}{
		{"in one round", []audit.ClaimRequest{
			{Source: "shop", EventID: "k1", ExecutionID: "7", WorkflowID: "wf-a"},
			{Source: "shop", EventID: "k2", ExecutionID: "7", WorkflowID: "wf-b"},
		}, 1},
		{"the later in an earlier round", []audit.ClaimRequest{
			{Source: "shop", EventID: "k1", ExecutionID: "1", WorkflowID: "wf-a"},
			{Source: "shop", EventID: "k1", ExecutionID: "7", WorkflowID: "wf-a"},
			{Source: "shop", EventID: "k2", ExecutionID: "7", WorkflowID: "wf-b"},
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audittest.Each(t, func(t *testing.T, dialect string) {
				ctx := context.Background()
				batched := audittest.Open(t, dialect, store.Options{})
				got, errs := batched.ClaimTogether(ctx, tc.reqs)
				alone := audittest.Open(t, dialect, store.Options{Batching: store.Batching{Off: true}})
				for i, req := range tc.reqs {
					want, werr := alone.Claim(ctx, req)
					if fmt.Sprint(got[i]) != fmt.Sprint(want) || fmt.Sprint(errs[i]) != fmt.Sprint(werr) {
						t.Errorf("claim %d: batch %+v (%v), one by one %+v (%v)", i, got[i], errs[i], want, werr)
					}
				}
				if audit.ErrorCode(errs[tc.refused]) != audit.CodeConflict {
					t.Errorf("the second workflow's execution 7: %+v, %v; want a conflict", got[tc.refused], errs[tc.refused])
				}
			})
		})
	}
}

// TestClaimedRetryOfInABatch: a client's retry_of naming an execution of
// another event roots the claiming execution under the one it names, in a
// batch as one by one (found by the model test: the batch kept it its own
// root).
func TestClaimedRetryOfInABatch(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		batched := audittest.Open(t, dialect, store.Options{})
		alone := audittest.Open(t, dialect, store.Options{Batching: store.Batching{Off: true}})
		first := audit.ClaimRequest{Source: "shop", EventID: "k0", ExecutionID: "1", WorkflowID: "wf"}
		claimed := []audit.ClaimRequest{
			{Source: "shop", EventID: "k1", ExecutionID: "2", WorkflowID: "wf"},
			{Source: "shop", EventID: "k2", ExecutionID: "5", WorkflowID: "wf", RetryOf: "1"},
		}
		failed := audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:5", ExecutionID: "5",
			WorkflowID: "wf", Mode: "webhook", Message: "failed"}
		var shown []string
		for _, s := range []*store.Store{batched, alone} {
			if _, err := s.Claim(ctx, first); err != nil {
				t.Fatal(err)
			}
			if s == batched {
				if _, errs := s.ClaimTogether(ctx, claimed); errs[0] != nil || errs[1] != nil {
					t.Fatalf("batch: %v", errs)
				}
			} else {
				for _, req := range claimed {
					if _, err := s.Claim(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := s.RecordError(ctx, failed); err != nil {
				t.Fatal(err)
			}
			var line []string
			for _, key := range []string{"k0", "k2"} {
				d, err := s.Event(ctx, "shop", key)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range d.Errors {
					line = append(line, key+" error of "+e.ExecutionID)
				}
				for _, x := range d.Executions {
					line = append(line, fmt.Sprintf("%s execution %s root %s claimed retry of %q", key, x.ID, x.Root, x.ClaimedRetryOf))
				}
			}
			shown = append(shown, strings.Join(line, "; "))
		}
		if shown[0] != shown[1] {
			t.Errorf("batch:      %s\none by one: %s", shown[0], shown[1])
		}
	})
}
