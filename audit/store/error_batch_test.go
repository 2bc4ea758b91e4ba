package store_test

import (
	"context"
	"fmt"
	"strings"
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

// TestErrorsLinkedAloneJoinTheirEvents covers what only a report recorded
// alone, or an error its claim links, writes: a Retry's error, linked to
// the event through the execution it retries, makes the Retry part of the
// event and flags the entry its lineage holds; an error that came before
// its execution's claim is linked by the claim, and flags the entry.
func TestErrorsLinkedAloneJoinTheirEvents(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{Lookup: retryOf{"r2", "h1"}})
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "retried", ExecutionID: "h1"}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []audit.N8NErrorReport{
			{Kind: audit.N8NErrorExecution, DedupeKey: "exec:r2", ExecutionID: "r2", RetryOf: "h1", WorkflowID: "wf",
				Node: "Create order", Message: "the CRM timed out"},
			{Kind: audit.N8NErrorExecution, DedupeKey: "exec:p1", ExecutionID: "p1", WorkflowID: "wf",
				Node: "Create order", Message: "the CRM timed out"},
		} {
			if _, err := s.RecordError(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "pending", ExecutionID: "p1"}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ event, exec, retryOf string }{{"retried", "r2", "h1"}, {"pending", "p1", ""}} {
			d, err := s.Event(ctx, "shop", c.event)
			if err != nil {
				t.Fatal(err)
			}
			if d.Review != "error" {
				t.Errorf("%s: review reason %q, want error", c.event, d.Review)
			}
			var line *audit.HistoryLine
			for i := range d.History {
				if d.History[i].Kind == audit.KindError {
					line = &d.History[i]
				}
			}
			if line == nil || line.ExecutionID != c.exec || line.RetryOf != c.retryOf || line.ErrorID == nil {
				t.Errorf("%s: error line %+v, want one of %s retrying %q", c.event, line, c.exec, c.retryOf)
			}
			roles := map[string]string{}
			for _, x := range d.Executions {
				roles[x.ID] = x.Presence.Role
			}
			if _, ok := roles[c.exec]; !ok {
				t.Errorf("%s: executions %v, want %s among them", c.event, roles, c.exec)
			}
			alerts := 0
			for _, a := range d.Alerts {
				if a.Kind == audit.RowAlert && strings.Contains(a.Payload, audit.AlertExecutionError) {
					alerts++
				}
			}
			if alerts != 1 {
				t.Errorf("%s: %d alerts about the error, want 1: %+v", c.event, alerts, d.Alerts)
			}
		}
	})
}

// TestOnlyAnErrorThatAlertsWakesTheOutbox: the outbox worker is woken after
// an error that wrote an alert, and not after one that wrote none (of a
// finished event nobody was alerted about), in a round or alone.
func TestOnlyAnErrorThatAlertsWakesTheOutbox(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		for _, api := range []bool{false, true} { // a round of one; alone (n8n's API was asked)
			opts := store.Options{}
			if api {
				opts.Lookup = retryOf{}
			}
			s := audittest.Open(t, dialect, opts)
			for _, c := range []struct{ event, exec string }{{"done", "x1"}, {"held", "x2"}} {
				if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: c.event, ExecutionID: c.exec,
					WorkflowID: "wf"}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "done", ExecutionID: "x1",
				WorkflowID: "wf", Outcome: audit.OutcomeDone}); err != nil {
				t.Fatal(err)
			}
			woken := func() bool {
				select {
				case <-s.Wakeups():
					return true
				default:
					return false
				}
			}
			woken() // what the claims and the outcome left
			for _, c := range []struct {
				exec  string
				alert bool
			}{{"x1", false}, {"x2", true}} {
				res, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution,
					DedupeKey: "exec:" + c.exec, ExecutionID: c.exec, WorkflowID: "wf", Mode: "webhook", Message: "failed"})
				if err != nil || res.Linked == nil {
					t.Fatalf("error of %s: %+v (%v)", c.exec, res, err)
				}
				if got := woken(); got != c.alert {
					t.Errorf("API %v: the error of %s woke the outbox: %v, want %v", api, c.exec, got, c.alert)
				}
			}
		}
	})
}
