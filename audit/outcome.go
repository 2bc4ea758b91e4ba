package audit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
)

// OutcomeRequest is what a workflow reports after its external action.
type OutcomeRequest struct {
	Source      string
	EventID     string
	Item        string
	Outcome     Outcome
	ExecutionID string
	Reason      string
	CRMRef      string
}

// Validate checks every field and names each bad one.
func (r OutcomeRequest) Validate() error {
	f := FieldErrors{}
	f.source("source", r.Source)
	f.text("event_id", r.EventID, true, MaxEventIDLen)
	f.text("item", r.Item, false, MaxItemLen)
	switch r.Outcome {
	case OutcomeDone, OutcomeFailed, OutcomeUnknown:
	case "":
		f.Add("outcome", "required: done, failed or unknown")
	default:
		f.Add("outcome", "must be done, failed or unknown")
	}
	f.text("execution_id", r.ExecutionID, false, MaxIDLen)
	f.note("reason", r.Reason, false, MaxTextLen)
	f.text("crm_ref", r.CRMRef, false, MaxNameLen)
	return f.Err()
}

// OutcomeResult is the answer to an outcome report.
type OutcomeResult struct {
	Changed     bool
	Status      Status
	NeedsReview bool
	Message     string // how the report relates to the holder, as the history says
}

// finishQueries move one ledger entry out of processing (finish) or mark it
// for review (unknown); read says where it is when neither matched.
type finishQueries struct {
	finish, unknown, read string
}

var eventFinish = finishQueries{
	finish: `UPDATE webhook_events SET status = :status, updated_at = :now, last_seen_at = :now, review_reason = '',
		crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
		WHERE source = :source AND event_id = :event_id AND status = 'processing' AND item_count = 0
		RETURNING status, holder_execution_id, item_count, review_reason`,
	unknown: `UPDATE webhook_events SET review_reason = 'unknown', last_seen_at = :now,
		crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
		WHERE source = :source AND event_id = :event_id AND status = 'processing' AND item_count = 0
		AND review_reason <> 'unknown'
		RETURNING status, holder_execution_id, item_count, review_reason`,
	read: `SELECT status, holder_execution_id, item_count, review_reason FROM webhook_events
		WHERE source = :source AND event_id = :event_id`,
}

var itemFinish = finishQueries{
	finish: `UPDATE event_items SET status = :status, updated_at = :now, review_reason = '',
		crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
		WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
		RETURNING status, holder_execution_id, 1 AS item_count, review_reason`,
	unknown: `UPDATE event_items SET review_reason = 'unknown',
		crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
		WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
		AND review_reason <> 'unknown'
		RETURNING status, holder_execution_id, 1 AS item_count, review_reason`,
	read: `SELECT status, holder_execution_id, 1 AS item_count, review_reason FROM event_items
		WHERE source = :source AND event_id = :event_id AND item = :item`,
}

type finishState struct {
	entryState
	ReviewReason string `db:"review_reason"`
}

// ReportOutcome moves an entry out of processing (done, failed) or marks
// it for review (unknown), only ever from processing and by a conditional
// update. The same outcome again changes nothing; any other transition is
// a conflict that names the current status.
func (s *Store) ReportOutcome(ctx context.Context, req OutcomeRequest) (OutcomeResult, error) {
	if err := req.Validate(); err != nil {
		return OutcomeResult{}, err
	}
	var res OutcomeResult
	var alerted bool
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		res, alerted, err = s.reportOutcome(ctx, tx, req, s.now())
		return err
	})
	if err != nil {
		return OutcomeResult{}, err
	}
	s.metrics.reported(req.Outcome, res.Changed)
	if alerted {
		s.nudge()
	}
	return res, nil
}

func (s *Store) reportOutcome(ctx context.Context, tx *sqlx.Tx, req OutcomeRequest, now time.Time) (OutcomeResult, bool, error) {
	chain := []string{req.ExecutionID}
	if req.ExecutionID != "" {
		var err error
		if chain, err = s.recordExecution(ctx, tx, executionRecord{ID: req.ExecutionID}, now); err != nil {
			return OutcomeResult{}, false, err
		}
	}
	arg := map[string]any{
		"source": req.Source, "event_id": req.EventID, "item": req.Item, "now": s.d.t(now),
		"status": string(req.Outcome), "crm_ref": req.CRMRef,
	}
	e, changed, err := s.finish(ctx, tx, req, arg)
	if err != nil {
		return OutcomeResult{}, false, err
	}
	res := OutcomeResult{Changed: changed, Status: e.Status, NeedsReview: e.Status == StatusProcessing}
	if !changed {
		return res, false, nil
	}
	if req.Item != "" {
		if _, _, err = s.rollUp(ctx, tx, req.Source, req.EventID, "", now); err != nil {
			return OutcomeResult{}, false, err
		}
	}
	if req.ExecutionID != "" {
		if _, err := s.namedExec(ctx, tx, "record reporter", insertReporter, map[string]any{
			"source": req.Source, "event_id": req.EventID, "execution_id": req.ExecutionID, "now": s.d.t(now),
		}); err != nil {
			return OutcomeResult{}, false, err
		}
	}
	res.Message = reporterMessage(req, e.Holder, chain)
	h := HistoryLine{Source: req.Source, EventID: req.EventID, Item: req.Item, Kind: KindOutcome,
		ExecutionID: req.ExecutionID, Decision: string(req.Outcome), Status: string(e.Status),
		Message: res.Message}
	if _, err := s.addHistory(ctx, tx, h, now); err != nil {
		return OutcomeResult{}, false, err
	}
	if req.Outcome == OutcomeUnknown {
		return res, true, s.alertEvent(ctx, tx, AlertUnknown, h, now)
	}
	sent, err := s.followUp(ctx, tx, h, now)
	return res, sent, err
}

// finish runs the conditional transition and, when it did not match,
// explains why from the entry's current state.
func (s *Store) finish(ctx context.Context, tx *sqlx.Tx, req OutcomeRequest, arg map[string]any) (finishState, bool, error) {
	q := eventFinish
	if req.Item != "" {
		q = itemFinish
		var itemCount int
		ok, err := s.namedGet(ctx, tx, &itemCount, "lock event", lockItemEvent, arg)
		switch {
		case err != nil:
			return finishState{}, false, err
		case !ok:
			return finishState{}, false, errorf(CodeNotFound, "no event %s/%s", req.Source, req.EventID)
		case itemCount == 0:
			return finishState{}, false, FieldErrors{"item": "this event was claimed without items: leave item out"}.Err()
		}
	}
	update := q.finish
	if req.Outcome == OutcomeUnknown {
		update = q.unknown
	}
	var e finishState
	ok, err := s.namedGet(ctx, tx, &e, "report outcome", update, arg)
	if err != nil || ok {
		if ok && req.Outcome == OutcomeUnknown && req.Item != "" {
			_, err = s.namedExec(ctx, tx, "mark for review", markEventUnknown, arg)
		}
		return e, ok, err
	}
	ok, err = s.namedGet(ctx, tx, &e, "read entry", q.read, arg)
	switch {
	case err != nil:
		return e, false, err
	case !ok && req.Item != "":
		return e, false, errorf(CodeNotFound, "no item %q in event %s/%s", req.Item, req.Source, req.EventID)
	case !ok:
		return e, false, errorf(CodeNotFound, "no event %s/%s", req.Source, req.EventID)
	case req.Item == "" && e.ItemCount > 0:
		return e, false, FieldErrors{"item": "required: this event was claimed with items"}.Err()
	case string(e.Status) == string(req.Outcome):
		return e, false, nil
	case req.Outcome == OutcomeUnknown && e.Status == StatusProcessing:
		return e, false, nil // already waiting for review
	}
	return e, false, &Error{Code: CodeConflict, Status: e.Status, Message: fmt.Sprintf(
		"the entry is %s: an outcome moves only a processing entry", e.Status)}
}

const (
	insertReporter = `INSERT INTO event_executions (source, event_id, execution_id, role, first_seen_at)
		VALUES (:source, :event_id, :execution_id, 'report', :now)
		ON CONFLICT (source, event_id, execution_id) DO NOTHING`
	markEventUnknown = `UPDATE webhook_events SET review_reason = 'unknown'
		WHERE source = :source AND event_id = :event_id AND status = 'processing'`
)

// reporterMessage says who reported, relative to the holder: the holder
// itself, a retry of it, or an execution that does not hold the entry.
func reporterMessage(req OutcomeRequest, holder string, chain []string) string {
	msg := string(req.Outcome)
	switch {
	case req.ExecutionID == "":
		msg += " (no execution named)"
	case len(chain) > 1 && (req.ExecutionID == holder || slices.Contains(chain[1:], holder)):
		msg += fmt.Sprintf(" by retry %s of %s", req.ExecutionID, chain[len(chain)-1])
	case req.ExecutionID == holder || holder == "":
		msg += " by " + req.ExecutionID
	default:
		msg += fmt.Sprintf(" by %s, which does not hold the entry (holder %s)", req.ExecutionID, holder)
	}
	if req.CRMRef != "" {
		msg += "; CRM reference " + req.CRMRef
	}
	if req.Reason != "" {
		msg += ": " + req.Reason
	}
	return msg
}
