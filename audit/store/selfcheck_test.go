package store_test

import (
	"context"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestScratch: the drill's alerts are recorded but never sent, and its
// cleanup leaves nothing of it behind.
func TestScratch(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{})
		run := audit.ScratchSource + "-abc"
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: audit.ScratchSource, EventID: run + "-e", ExecutionID: run + "-1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: audit.ScratchSource, EventID: run + "-e",
			ExecutionID: run + "-1", Outcome: audit.OutcomeUnknown}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + run + "-1",
			ExecutionID: run + "-1", Message: "drill"}); err != nil {
			t.Fatal(err)
		}
		var states []string
		if err := s.DB().Select(&states, `SELECT state FROM outbox`); err != nil {
			t.Fatal(err)
		}
		if len(states) == 0 {
			t.Fatal("the drill wrote no alert")
		}
		for _, st := range states {
			if st != audit.OutboxSkipped {
				t.Errorf("a drill alert is %s, want skipped", st)
			}
		}
		if err := s.DeleteScratch(ctx, run); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"webhook_events", "outbox", "n8n_errors", "executions", "event_history"} {
			var n int
			if err := s.DB().Get(&n, `SELECT count(*) FROM `+table); err != nil || n != 0 {
				t.Errorf("%s has %d rows after the cleanup (%v)", table, n, err)
			}
		}
	})
}
