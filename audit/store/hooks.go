package store

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// RecordHookReports records what n8n's execution hooks say about executions'
// starts and ends, in one transaction: the execution as n8n knows it, and
// for a failed one an error, linked and alerted like an Error Trigger
// payload at once (the error workflow's payload, when it comes, fills in the
// same record).
func (s *Store) RecordHookReports(ctx context.Context, reports []audit.N8NHookReport) ([]audit.N8NHookResult, error) {
	if err := audit.ValidateHookReports(reports); err != nil {
		return nil, err
	}
	out := make([]audit.N8NHookResult, len(reports))
	alerted := false
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := s.now()
		for i, r := range reports {
			res, err := s.recordHook(ctx, tx, r.Stored(s.redact), now)
			if err != nil {
				return err
			}
			out[i] = res
			alerted = alerted || (res.ErrorID != 0 && !res.Duplicate)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if alerted {
		s.nudge()
	}
	return out, nil
}

func (s *Store) recordHook(ctx context.Context, tx *sqlx.Tx, r audit.N8NHookReport, now time.Time) (audit.N8NHookResult, error) {
	kind := audit.SeenHookStart
	if r.Phase == audit.PhaseEnd {
		kind = audit.SeenHookEnd
	}
	status := ""
	if r.Phase == audit.PhaseEnd {
		status = r.Status
	}
	rec, err := s.recordExecution(ctx, tx, executionRecord{ID: r.ExecutionID, WorkflowID: r.WorkflowID,
		WorkflowName: r.WorkflowName, Mode: r.Mode, RetryOf: r.RetryOf, Status: status, Hook: true, Asked: true,
		Seen: audit.Sighting{Kind: kind, WorkflowID: r.WorkflowID, StartedAt: r.StartedAt}}, now)
	if err != nil {
		return audit.N8NHookResult{}, err
	}
	res := audit.N8NHookResult{ExecutionID: cmp.Or(rec.id(), r.ExecutionID), NewExecution: rec.reset != "" && rec.id() != "",
		Note: rec.reset}
	if !r.Failed() {
		return res, nil
	}
	msg := r.ErrorMessage
	if msg == "" {
		msg = fmt.Sprintf("n8n ended the execution with status %s and gave no message", r.Status)
	}
	e, _, err := s.recordError(ctx, tx, audit.N8NErrorReport{
		Kind: audit.N8NErrorHook, DedupeKey: "exec:" + r.ExecutionID, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf,
		WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Mode: r.Mode, Node: cmp.Or(r.ErrorNode, r.LastNode),
		Message: msg, HTTPCode: r.HTTPCode,
	}.Stored(s.redact), rec, now)
	if err != nil {
		return res, err
	}
	res.ErrorID, res.Duplicate, res.Linked = e.ID, e.Duplicate, e.Linked
	return res, nil
}
