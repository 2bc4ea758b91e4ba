package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// contradiction handles a report of the holder that disagrees with a
// person's resolution: the holder of a resolved failed entry reports done or
// unknown (the CRM may have the order the person took for not made), or the
// holder of a resolved done entry reports failed or unknown. Such a report
// is evidence, never noise: it is kept in the history with its CRM
// reference and alerted, and a failed entry goes back to processing,
// held by the reporter and waiting for a person (redeliveries are told
// in_progress) until a person decides again. It reports false when the
// report contradicts no resolution.
func (s *Store) contradiction(ctx context.Context, tx *sqlx.Tx, req audit.OutcomeRequest, e finishState, a fenceArgs,
	now time.Time) (audit.OutcomeResult, bool, bool, error) {
	if e.Holder != req.ExecutionID || string(e.Status) == string(req.Outcome) ||
		e.Status != audit.StatusFailed && e.Status != audit.StatusDone {
		return audit.OutcomeResult{}, false, false, nil
	}
	last, err := s.lastSettlement(ctx, tx, req.Source, req.EventID, req.Item)
	switch {
	case isNoRows(err):
		return audit.OutcomeResult{}, false, false, nil
	case err != nil:
		return audit.OutcomeResult{}, false, false, err
	case last.Kind != audit.KindResolution:
		return audit.OutcomeResult{}, false, false, nil
	}
	res := audit.OutcomeResult{Status: e.Status}
	var seen bool
	if err := s.get(ctx, tx, &seen, "read evidence", s.q.HistoryReadContradiction, req.Source, req.EventID, req.Item,
		req.ExecutionID, string(req.Outcome), req.Source, req.EventID, req.Item); err != nil {
		return res, false, false, err
	}
	if seen { // a resend of the same report: kept once
		res.NeedsReview = e.Status == audit.StatusProcessing
		return res, true, false, nil
	}
	if e.Status == audit.StatusFailed && req.Outcome != audit.OutcomeFailed {
		q := s.q.EventContradict
		if req.Item != "" {
			q = s.q.ItemContradict
		}
		var moved finishState
		ok, err := s.namedGet(ctx, tx, &moved, "contradict", q, a)
		if err != nil || !ok {
			return res, false, false, err
		}
		if req.Item != "" {
			if _, _, err := s.rollUp(ctx, tx, req.Source, req.EventID, "", now); err != nil {
				return res, false, false, err
			}
			if _, err := s.namedExec(ctx, tx, "mark for review", s.q.EventReviewContradiction, a); err != nil {
				return res, false, false, err
			}
		}
		res = audit.OutcomeResult{Changed: true, Status: moved.Status, NeedsReview: true}
	}
	msg := fmt.Sprintf("execution %s reported %s", req.ExecutionID, req.Outcome)
	if req.CRMRef != "" {
		msg += " (CRM reference " + req.CRMRef + ")"
	}
	msg += fmt.Sprintf(" after %s resolved the entry %s", last.Actor, e.Status)
	if res.Changed {
		msg += ": the CRM may have the order; the entry waits for a person again, redeliveries are told to wait"
	} else {
		msg += ": the entry stays done; check the CRM"
	}
	if req.Reason != "" {
		msg += ": " + req.Reason
	}
	res.Message = msg
	h := audit.HistoryLine{Source: req.Source, EventID: req.EventID, Item: req.Item, Kind: audit.KindContradiction,
		ExecutionID: req.ExecutionID, Decision: string(req.Outcome), Status: string(res.Status), Message: msg,
		CRMRef: req.CRMRef}
	if _, err := s.addHistory(ctx, tx, h, now); err != nil {
		return res, false, false, err
	}
	return res, true, true, s.alertEvent(ctx, tx, audit.AlertContradiction, h, now)
}
