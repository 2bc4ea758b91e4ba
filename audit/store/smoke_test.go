package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

func TestSmoke(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, Redactor: n8n.Redactor{}})
		c := audit.ClaimRequest{Source: "shop", EventID: "e1", ExecutionID: "40", WorkflowID: "wf", RunStamp: "40:1:abc"}
		res, err := s.Claim(ctx, c)
		t.Logf("%+v %v", res, err)
		res, err = s.Claim(ctx, c)
		t.Logf("%+v %v", res, err)
		c2 := c
		c2.ExecutionID, c2.RunStamp = "41", "41:2:def"
		res, err = s.Claim(ctx, c2)
		t.Logf("%+v %v", res, err)
		o, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "e1", Outcome: "unknown", ExecutionID: "40", WorkflowID: "wf", RunStamp: "40:1:abc"})
		t.Logf("%+v %v", o, err)
		o, err = s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "e1", Outcome: "done", ExecutionID: "41", WorkflowID: "wf", RunStamp: "41:2:def"})
		t.Logf("%+v %v", o, err)
		st, err := s.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "e1", To: audit.StatusFailed, Actor: "ann", Note: "n", Holder: "40"})
		t.Logf("%v %v", st, err)
		res, err = s.Claim(ctx, c2)
		t.Logf("%+v %v", res, err)
		e, err := s.Event(ctx, "shop", "e1")
		t.Logf("%+v %v", e.Event, err)
		for _, h := range e.History {
			t.Logf("  %s %s %s %s %s", h.Kind, h.ExecutionID, h.Decision, h.Status, h.Message)
		}
		r, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:41", ExecutionID: "41", WorkflowID: "wf", Message: "boom"})
		t.Logf("%+v %v", r, err)
	})
}
