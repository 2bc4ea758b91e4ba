package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestCaptureKeepsItsFences: PostgreSQL captures a round's entries in one
// statement, each claim sent to the step the batch's lock read called for.
// When the entry is no longer what the lock read, the step's fence holds:
// the step does not decide the claim (it takes another step), the entry is
// left as it is, and the claiming execution is not written. Here the lock's
// read is made stale on purpose: an entry done since it read failed, and a
// key another session made after it found none.
func TestCaptureKeepsItsFences(t *testing.T) {
	ctx := context.Background()
	s := audittest.Open(t, "postgres", store.Options{})
	claim := func(event, execution string) {
		t.Helper()
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: execution,
			WorkflowID: "wf"}); err != nil {
			t.Fatal(err)
		}
	}
	claim("done-since", "x1")
	if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "done-since", ExecutionID: "x1",
		Outcome: audit.OutcomeDone}); err != nil {
		t.Fatal(err)
	}
	claim("made-since", "x2")

	key := func(event string) audit.EventKey { return audit.EventKey{Source: "shop", EventID: event} }
	decided, err := s.CaptureAs(ctx, []audit.ClaimRequest{
		{Source: "shop", EventID: "done-since", ExecutionID: "y1", WorkflowID: "wf"},
		{Source: "shop", EventID: "made-since", ExecutionID: "y2", WorkflowID: "wf"},
		{Source: "shop", EventID: "new", ExecutionID: "y3", WorkflowID: "wf"}, // the control: captured
	}, map[audit.EventKey]audit.Status{key("done-since"): audit.StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(decided, []audit.EventKey{key("new")}) {
		t.Errorf("the round decided %v, want only shop/new", decided)
	}
	var entries []struct {
		EventID string `db:"event_id"`
		Status  string `db:"status"`
		Holder  string `db:"holder_execution_id"`
	}
	if err := s.DB().Select(&entries,
		`SELECT event_id, status, holder_execution_id FROM webhook_events ORDER BY event_id`); err != nil {
		t.Fatal(err)
	}
	want := "[{done-since done x1} {made-since processing x2} {new processing y3}]"
	if got := fmt.Sprint(entries); got != want {
		t.Errorf("entries %s, want %s", got, want)
	}
	var written []string
	if err := s.DB().Select(&written, `SELECT execution_id FROM executions ORDER BY execution_id`); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(written, []string{"x1", "x2", "y3"}) {
		t.Errorf("executions written %v, want x1, x2 and y3 (y1 and y2 take another step)", written)
	}
}
