package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestErrorPayloadsAtOnce: error payloads posted all at once go through the
// group commit and leave what they leave one by one: one row per payload
// (copies answered as duplicates), every error of an execution that claimed
// an event linked to it and the event in review, whether the claim came
// before the error or at the same moment, and the same alerts.
func TestErrorPayloadsAtOnce(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		batched := audittest.Open(t, dialect, store.Options{})
		alone := audittest.Open(t, dialect, store.Options{Batching: store.Batching{Off: true}})
		const events, copies = 12, 3
		errorOf := func(exec string) audit.N8NErrorReport {
			return audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + exec, ExecutionID: exec,
				WorkflowID: "wf", Node: "Create order", Message: "the CRM timed out"}
		}
		claimOf := func(i int, exec string) audit.ClaimRequest {
			return audit.ClaimRequest{Source: "shop", EventID: fmt.Sprintf("e%d", i), ExecutionID: exec, WorkflowID: "wf"}
		}
		// Events claimed before (c…), claimed at the same moment as their
		// errors (m…), and errors of executions that claim nothing (u…).
		for _, s := range []*store.Store{batched, alone} {
			for i := 0; i < events; i++ {
				if _, err := s.Claim(ctx, claimOf(i, fmt.Sprintf("c%d", i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		var reports []audit.N8NErrorReport
		for i := 0; i < events; i++ {
			for c := 0; c < copies; c++ {
				reports = append(reports, errorOf(fmt.Sprintf("c%d", i)), errorOf(fmt.Sprintf("m%d", i)),
					errorOf(fmt.Sprintf("u%d", i)))
			}
		}

		type answer struct {
			res audit.N8NErrorResult
			err error
		}
		answers := make([]answer, len(reports))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, r := range reports {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := batched.RecordError(ctx, r)
				answers[i] = answer{res, err}
			}()
		}
		for i := 0; i < events; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := batched.Claim(ctx, claimOf(events+i, fmt.Sprintf("m%d", i))); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, r := range reports {
			if _, err := alone.RecordError(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < events; i++ {
			if _, err := alone.Claim(ctx, claimOf(events+i, fmt.Sprintf("m%d", i))); err != nil {
				t.Fatal(err)
			}
		}

		recorded := map[string]int{}
		for i, a := range answers {
			if a.err != nil {
				t.Fatalf("payload %d: %v", i, a.err)
			}
			if !a.res.Duplicate {
				recorded[reports[i].DedupeKey]++
			}
		}
		for _, r := range reports {
			if n := recorded[r.DedupeKey]; n != 1 {
				t.Errorf("%s recorded %d times, want once, the copies answered duplicate", r.DedupeKey, n)
			}
		}
		for name, s := range map[string]*store.Store{"group commit": batched, "one by one": alone} {
			list, _, err := s.Errors(ctx, audit.N8NErrorFilter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if want := 3 * events; len(list) != want {
				t.Errorf("%s: %d errors, want %d", name, len(list), want)
			}
			for i := 0; i < 2*events; i++ {
				d, err := s.Event(ctx, "shop", fmt.Sprintf("e%d", i))
				if err != nil {
					t.Fatal(err)
				}
				if !d.NeedsReview {
					t.Errorf("%s: e%d (%s) does not wait for review after its execution's error", name, i, d.Status)
				}
			}
		}
		for _, q := range []string{
			"SELECT count(*) FROM outbox",
			"SELECT count(*) FROM n8n_errors WHERE source IS NOT NULL",
			"SELECT count(*) FROM event_history WHERE kind <> 'claim'",
		} {
			var a, b int
			if err := batched.DB().Get(&a, q); err != nil {
				t.Fatal(err)
			}
			if err := alone.DB().Get(&b, q); err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Errorf("%s: group commit %d, one by one %d", q, a, b)
			}
		}
	})
}
