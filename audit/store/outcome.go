package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// reviewContradiction is the review reason of an entry whose holder
// contradicted a person's resolution.
const reviewContradiction = "contradiction"

// fenceArgs names the parameters of the fenced transitions.
type fenceArgs struct {
	Source   string   `db:"source"`
	EventID  string   `db:"event_id"`
	Item     string   `db:"item"`
	Status   string   `db:"status"`
	CRMRef   string   `db:"crm_ref"`
	Reporter string   `db:"reporter"`
	Chain    []string `db:"chain"`
	Now      any      `db:"now"`
}

// finishQueries move one ledger entry: finish moves it, read says where
// it is when finish did not match (an item's outcome report: ItemFinish or
// ItemUnknown, fenced as EventBatchFinish is; a person's resolution).
type finishQueries struct {
	finish, unknown, read string
}

func (q queries) itemFinish() finishQueries {
	return finishQueries{finish: q.ItemFinish, unknown: q.ItemUnknown, read: q.ItemReadFinished}
}

// fence is a report's parameters for the fenced transitions.
func (s *Store) fence(rep *report, now time.Time) fenceArgs {
	r := rep.req
	return fenceArgs{Source: r.Source, EventID: r.EventID, Item: r.Item, Status: string(r.Outcome),
		CRMRef: r.CRMRef, Reporter: r.ExecutionID, Chain: rep.chain, Now: s.t(now)}
}

type finishState struct {
	entryState
	ReviewReason string `db:"review_reason"`
}

// ReportOutcome moves an entry for its holder: out of processing (done,
// failed), or into review (unknown), by a conditional update fenced by the
// holder. The same outcome again from the execution that moved the entry
// changes nothing. A report from any other execution is refused with
// CodeNotHolder, and kept as evidence in the history; a status conflict
// (done is terminal) is refused with CodeConflict.
func (s *Store) ReportOutcome(ctx context.Context, req audit.OutcomeRequest) (audit.OutcomeResult, error) {
	if err := req.Validate(); err != nil {
		return audit.OutcomeResult{}, err
	}
	if req.Item == "" {
		return s.outcomes.do(ctx, outcomeInput{req: req}) // the batch finds out whether lineage matters
	}
	lin := s.learnLineage(ctx, lineageKey{Source: req.Source, EventID: req.EventID, Items: []string{req.Item},
		ExecutionID: req.ExecutionID, Failed: true})
	return s.outcomes.do(ctx, outcomeInput{req: req, lin: lin, learned: true})
}

// reportOutcome runs one report in tx, after recording its reporter with
// what n8n said of it: the report is then finished as a round's are
// (finishReports, finished). A refusal is returned apart from err, so that
// the transaction commits the evidence it wrote.
func (s *Store) reportOutcome(ctx context.Context, tx *sqlx.Tx, req audit.OutcomeRequest, lin lineage, now time.Time) (audit.OutcomeResult, error, bool, error) {
	rec, err := s.recordReporter(ctx, tx, req, lin, now)
	if err != nil {
		return audit.OutcomeResult{}, nil, false, err
	}
	chain := rec.chain
	if id := rec.id(); id != "" {
		req.ExecutionID = id // the execution as the service keeps it (31~2 for a reused id)
	}
	rep := &report{req: req, chain: chain, note: joinNotes(rec.reset, lin.note), recorded: true}
	if err := s.get(ctx, tx, &rep.workflow, "read workflow", s.q.ExecutionWorkflowOf, req.ExecutionID); err != nil &&
		!isNoRows(err) {
		return audit.OutcomeResult{}, nil, false, err
	}
	changed, err := s.finish(ctx, tx, rep, now)
	if err != nil {
		return audit.OutcomeResult{}, nil, false, err
	}
	e := rep.e
	res := audit.OutcomeResult{Changed: changed, Status: e.Status, NeedsReview: e.Status == audit.StatusProcessing && e.ReviewReason != ""}
	a := s.fence(rep, now)
	if !changed && len(chain) > 0 {
		kept, handled, alerted, err := s.contradiction(ctx, tx, req, e, a, now)
		if err != nil {
			return audit.OutcomeResult{}, nil, false, err
		}
		if handled && (kept.Changed || e.Status == audit.StatusProcessing) {
			return kept, nil, alerted, nil
		}
		if handled { // a done entry stays done: the report is refused, its evidence kept
			return res, s.judge(req, e, chain), alerted, nil
		}
	}
	if !changed {
		refused := s.judge(req, e, chain)
		if refused != nil && audit.ErrorCode(refused) == audit.CodeNotHolder {
			alerted, err := s.keepEvidence(ctx, tx, req, e, chain, refused.Error(), now)
			if err == nil {
				err = s.count(ctx, tx, now, req.Source, rep.workflow, audit.MetricRefused)
			}
			return res, refused, alerted, err
		}
		return res, refused, false, nil
	}
	if err := s.finished(ctx, tx, []*report{rep}, now); err != nil {
		return audit.OutcomeResult{}, nil, false, err
	}
	return rep.res, nil, rep.alerted, nil
}

// recordReporter records what n8n said of the reporting execution and
// returns what recordExecution found: its chain is empty for an execution
// that is not the one the service knows by that id.
func (s *Store) recordReporter(ctx context.Context, tx *sqlx.Tx, req audit.OutcomeRequest, lin lineage, now time.Time) (recorded, error) {
	if err := s.recordHops(ctx, tx, lin, now); err != nil {
		return recorded{}, err
	}
	return s.recordExecution(ctx, tx, executionRecord{ID: req.ExecutionID, WorkflowID: req.WorkflowID,
		Mode: lin.mode, RetryOf: lin.retryOf, Note: lin.note,
		Seen:  audit.Sighting{Kind: audit.SeenOutcome, WorkflowID: req.WorkflowID, StartedAt: lin.self.startedAt()},
		Asked: lin.self.tried}, now)
}

// finish runs one report's fenced transition (an event's by
// finishReports, an item's by its statements, after locking the event's
// row) and, when it did not match, reads the entry as it is into rep.e.
func (s *Store) finish(ctx context.Context, tx *sqlx.Tx, rep *report, now time.Time) (bool, error) {
	req, a := rep.req, s.fence(rep, now)
	read := s.q.EventReadFinished
	if req.Item != "" {
		read = s.q.ItemReadFinished
		var itemCount int
		ok, err := s.namedGet(ctx, tx, &itemCount, "lock event", s.q.EventTouchReported, a)
		switch {
		case err != nil:
			return false, err
		case !ok:
			return false, audit.Errorf(audit.CodeNotFound, "no event %s/%s", req.Source, req.EventID)
		case itemCount == 0:
			return false, audit.FieldErrors{"item": "this event was claimed without items: leave item out"}.Err()
		}
	}
	if len(rep.chain) > 0 {
		changed, err := s.finishReports(ctx, tx, []*report{rep}, now)
		if err != nil || len(changed) > 0 {
			return len(changed) > 0, err
		}
	}
	e := &rep.e
	ok, err := s.namedGet(ctx, tx, e, "read entry", read, a)
	switch {
	case err != nil:
		return false, err
	case !ok && req.Item != "":
		return false, audit.Errorf(audit.CodeNotFound, "no item %q in event %s/%s", req.Item, req.Source, req.EventID)
	case !ok:
		return false, audit.Errorf(audit.CodeNotFound, "no event %s/%s", req.Source, req.EventID)
	case req.Item == "" && e.ItemCount > 0:
		return false, audit.FieldErrors{"item": "required: this event was claimed with items"}.Err()
	}
	return false, nil
}

// judge explains a report that moved nothing: a resend of what the
// reporter already said (nil), a status conflict, or a reporter that does
// not hold the entry.
func (s *Store) judge(req audit.OutcomeRequest, e finishState, chain []string) error {
	holds := e.Holder == req.ExecutionID && len(chain) > 0
	switch {
	case holds && string(e.Status) == string(req.Outcome):
		return nil
	case holds && req.Outcome == audit.OutcomeUnknown && e.Status == audit.StatusProcessing:
		return nil // already waiting for review
	case holds && e.Status == audit.StatusProcessing && e.ReviewReason == reviewContradiction:
		return nil // its contradiction of a person's resolution is kept: a person decides
	case holds || e.Holder == "" || (len(chain) > 1 && slices.Contains(chain[1:], e.Holder)):
		return &audit.Error{Code: audit.CodeConflict, Status: e.Status, Holder: e.Holder, Message: fmt.Sprintf(
			"the entry is %s: %s cannot follow it (done is final; failed is left only by a new claim or a Retry)",
			e.Status, req.Outcome)}
	}
	return &audit.Error{Code: audit.CodeNotHolder, Status: e.Status, Holder: e.Holder, Message: fmt.Sprintf(
		"execution %s does not hold %s (holder %s, %s): nothing was changed; the report is kept as evidence",
		req.ExecutionID, entryName(req.Source, req.EventID, req.Item), holderName(e.Holder), e.Status)}
}

// keepEvidence writes a refused report into the history, once per
// execution and outcome: a node's Retry On Fail resends it. An entry still
// processing that hears done or unknown from outside the fence waits for a
// person, who may confirm the evidence, and such a report is alerted (on a
// done entry too: a second order may exist); a stray failed changes no risk
// and is only news in a thread already open.
func (s *Store) keepEvidence(ctx context.Context, tx *sqlx.Tx, req audit.OutcomeRequest, e finishState, chain []string, why string, now time.Time) (bool, error) {
	var seen bool
	if err := s.get(ctx, tx, &seen, "read evidence", s.q.HistoryReadEvidence,
		req.Source, req.EventID, req.Item, req.ExecutionID, string(req.Outcome)); err != nil || seen {
		return false, err
	}
	msg := fmt.Sprintf("execution %s reported %s", req.ExecutionID, req.Outcome)
	if req.CRMRef != "" {
		msg += " (" + req.CRMRef + ")"
	}
	msg += fmt.Sprintf(" but does not hold the entry (holder %s, %s)", holderName(e.Holder), e.Status)
	if len(chain) == 0 {
		msg += "; its id is known from another workflow"
	}
	if req.Reason != "" {
		msg += ": " + req.Reason
	}
	h := audit.HistoryLine{Source: req.Source, EventID: req.EventID, Item: req.Item, Kind: audit.KindNotHolder,
		ExecutionID: req.ExecutionID, Decision: string(req.Outcome), Status: string(e.Status),
		Message: msg, CRMRef: req.CRMRef}
	if _, err := s.addHistory(ctx, tx, h, now); err != nil {
		return false, err
	}
	if e.Status == audit.StatusProcessing && req.Outcome != audit.OutcomeFailed {
		q := s.q.EventKeepEvidence
		if req.Item != "" {
			q = s.q.ItemKeepEvidence
		}
		a := map[string]any{"source": req.Source, "event_id": req.EventID, "item": req.Item}
		if _, err := s.namedExec(ctx, tx, "mark for review", q, a); err != nil {
			return false, err
		}
		if req.Item != "" {
			if _, err := s.namedExec(ctx, tx, "mark for review", s.q.EventReviewNotHolder, a); err != nil {
				return false, err
			}
		}
	}
	if req.Outcome == audit.OutcomeFailed {
		return s.followUp(ctx, tx, h, now)
	}
	// Done or unknown from outside the fence says that a second execution
	// may have acted: people hear of it, whether or not the entry was
	// alerted before, and the stale detector need not say it again.
	return true, s.alertEvent(ctx, tx, audit.AlertNotHolder, h, now)
}

// reporterMessage says who moved the entry: the holder, or a Retry of it
// ("done by retry 32 of 30").
func reporterMessage(req audit.OutcomeRequest, chain []string, note string) string {
	msg := string(req.Outcome) + " by "
	if len(chain) > 1 {
		msg += fmt.Sprintf("retry %s of %s", req.ExecutionID, strings.Join(chain[1:], " ← "))
	} else {
		msg += req.ExecutionID
	}
	if req.CRMRef != "" {
		msg += "; CRM reference " + req.CRMRef
	}
	if req.Reason != "" {
		msg += ": " + req.Reason
	}
	if note != "" {
		msg += " (" + note + ")"
	}
	return msg
}

func entryName(source, eventID, item string) string {
	if item != "" {
		return source + "/" + eventID + " item " + item
	}
	return source + "/" + eventID
}

func holderName(h string) string {
	if h == "" {
		return "none"
	}
	return h
}
