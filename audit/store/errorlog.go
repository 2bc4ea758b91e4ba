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

// unlinkedGrace delays the alert about an execution error that links to no
// event yet: the claim it belongs to may be a moment behind, and then the
// event's own alert replaces it.
const unlinkedGrace = 30 * time.Second

// RecordError stores an error report once per execution (or per identical
// payload), records the execution's lineage, links the error to the event
// its execution (or the execution it retries) touched, and writes the alert,
// all in one transaction: a batch (errorBatch), shared with concurrent
// reports, or of one when batching is off. A linked error leaves the entry processing (the
// outcome is unknown) and marks it for review.
func (s *Store) RecordError(ctx context.Context, r audit.N8NErrorReport) (audit.N8NErrorResult, error) {
	return s.errors.do(ctx, s.errorInput(ctx, r))
}

// errorInput is a report as stored, with what n8n's API said of its
// execution, asked before the transaction: whether the execution is the one
// the service knows by its id, and whether the retryOf the payload reports
// is n8n's.
func (s *Store) errorInput(ctx context.Context, r audit.N8NErrorReport) errorInput {
	r = r.Stored(s.redact)
	var self n8nWord
	if r.Kind == audit.N8NErrorExecution && r.ExecutionID != "" {
		self = s.askN8N(ctx, r.ExecutionID)
	}
	return errorInput{rep: r, self: self}
}

// recordReport records a report in tx: its execution's lineage, then the
// error itself (recordError). It reports whether it wrote an alert.
func (s *Store) recordReport(ctx context.Context, tx *sqlx.Tx, r audit.N8NErrorReport, self n8nWord,
	now time.Time) (audit.N8NErrorResult, bool, error) {
	var rec recorded
	if r.Kind == audit.N8NErrorExecution || r.Kind == audit.N8NErrorReconcile {
		var err error
		if rec, err = s.recordExecution(ctx, tx, errorExecution(r, self), now); err != nil {
			return audit.N8NErrorResult{}, false, err
		}
	}
	return s.recordError(ctx, tx, r, rec, now)
}

// errorExecution is what an error report says of its execution. Lineage
// counts only as n8n's word: reconciliation's (read from n8n's API), or a
// payload's retryOf that n8n's API confirmed for that very execution (self);
// otherwise the payload's retryOf is kept as reported, and grants nothing.
func errorExecution(r audit.N8NErrorReport, self n8nWord) executionRecord {
	e := executionRecord{ID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Mode: r.Mode,
		URL: r.URL, Seen: audit.Sighting{Kind: audit.SeenError, WorkflowID: r.WorkflowID, StartedAt: self.startedAt()},
		Asked: self.tried}
	switch {
	case r.Kind == audit.N8NErrorReconcile:
		e.RetryOf, e.Asked = r.RetryOf, true
	case self.asked && self.err == nil:
		e.Mode, e.RetryOf = self.x.Mode, self.x.RetryOf
		if r.RetryOf != self.x.RetryOf {
			e.ClaimedRetryOf = r.RetryOf
		}
	default:
		e.ClaimedRetryOf = r.RetryOf
	}
	return e
}

// recordError records a report whose execution rec is, as the service
// keeps it (none for a report of no execution). It reports whether it wrote
// an alert.
func (s *Store) recordError(ctx context.Context, tx *sqlx.Tx, r audit.N8NErrorReport, rec recorded,
	now time.Time) (audit.N8NErrorResult, bool, error) {
	chain := rec.chain
	if id := rec.id(); id != "" && id != r.ExecutionID {
		// A new execution reusing an id: its error is its own, not a
		// duplicate of the one the old execution had.
		if r.DedupeKey == "exec:"+r.ExecutionID {
			r.DedupeKey = "exec:" + id
		}
		r.ExecutionID = id
	}
	if rec.reset != "" {
		r.AddNote(rec.reset)
	}
	res := audit.N8NErrorResult{Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf}
	var events []audit.EventKey
	if len(chain) > 0 {
		var err error
		if events, err = s.eventsOf(ctx, tx, chain); err != nil {
			return res, false, err
		}
		if len(events) == 0 && !slices.Contains(chain, rec.root) {
			// A retryOf n8n did not confirm links the error to the event
			// of the lineage it names, for people to see; it makes the
			// error no error of the holder (attachError judges by n8n's
			// lineage).
			if events, err = s.eventsOf(ctx, tx, []string{rec.root}); err != nil {
				return res, false, err
			}
		}
	}
	var link audit.EventKey
	if len(events) > 0 {
		link = events[0]
	}
	ids, err := s.insertErrors(ctx, tx, []errorRow{errorRowOf(r, rec.root, link)}, now)
	if err != nil {
		return res, false, err
	}
	if res.ID = ids[r.DedupeKey]; res.ID == 0 {
		res, err := s.duplicateError(ctx, tx, r)
		return res, false, err
	}
	if len(events) == 0 {
		return res, r.Kind != audit.N8NErrorTest, s.alertUnlinked(ctx, tx, res.ID, r, now)
	}
	e := audit.N8NErrorRecord{ID: res.ID, Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf,
		WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node, Message: r.Message, URL: r.URL}
	alerted, err := s.attachError(ctx, tx, e, events, now)
	if err != nil {
		return res, false, err
	}
	res.Linked = &events[0]
	return res, alerted, nil
}

// duplicateError answers a report of an error already recorded. A payload
// and a reconciliation record describe the same execution: whichever comes
// second fills in what the first lacks (mergeError).
func (s *Store) duplicateError(ctx context.Context, tx *sqlx.Tx, r audit.N8NErrorReport) (audit.N8NErrorResult, error) {
	var e audit.N8NErrorRecord
	if err := s.get(ctx, tx, &e, "read error", s.q.ErrorReadDuplicate, r.DedupeKey); err != nil {
		return audit.N8NErrorResult{}, err
	}
	if m, changed := mergeError(e, r); changed {
		if _, err := s.namedExec(ctx, tx, "merge error", s.q.ErrorMerge, map[string]any{
			"id": m.ID, "retry_of": m.RetryOf, "workflow_id": m.WorkflowID, "workflow_name": m.WorkflowName,
			"mode": m.Mode, "node": m.Node, "message": m.Message, "http_code": m.HTTPCode, "url": m.URL,
			"payload": m.Payload, "truncated": m.PayloadTruncated}); err != nil {
			return audit.N8NErrorResult{}, err
		}
		e = m
	}
	res := audit.N8NErrorResult{ID: e.ID, Kind: e.Kind, Duplicate: true, ExecutionID: e.ExecutionID, RetryOf: e.RetryOf}
	if ev, ok := e.Linked(); ok {
		res.Linked = &ev
	}
	return res, nil
}

// eventsOf returns the events touched by the nearest execution of the chain
// that touched any.
func (s *Store) eventsOf(ctx context.Context, q any, chain []string) ([]audit.EventKey, error) {
	for _, id := range chain {
		var events []audit.EventKey
		if err := s.selectAll(ctx, q, &events, "find events", s.q.EventExecutionFindEvents, id); err != nil {
			return nil, err
		}
		if len(events) > 0 {
			return events, nil
		}
	}
	return nil, nil
}

// attachError makes an error, linked to the first of events, part of the
// events' histories, and writes what it says of each entry (onEntry) with
// the statements a round of errors writes with (writeErrors). Each entry is
// read under its row lock (a no-op update; SQLite has one writer anyway): a
// claim that takes the entry over commits before or after this error is
// judged, never between the read and the review flag, so an old holder's
// error cannot flag the new holder's entry. It reports whether it wrote an
// alert.
func (s *Store) attachError(ctx context.Context, tx *sqlx.Tx, e audit.N8NErrorRecord, events []audit.EventKey,
	now time.Time) (bool, error) {
	// The entries are locked before the threads are read: a thread another
	// transaction opened while this one waited for an entry is then seen.
	type locked struct {
		Holder    string `db:"holder_execution_id"`
		ItemCount int    `db:"item_count"`
		eventState
	}
	ents := make([]locked, len(events))
	threads := make([]string, len(events))
	for i, ev := range events {
		ok, err := s.namedGet(ctx, tx, &ents[i], "read event", s.q.EventAttachError,
			map[string]any{"source": ev.Source, "event_id": ev.EventID})
		switch {
		case err != nil:
			return false, err
		case !ok:
			return false, audit.Errorf(audit.CodeNotFound, "no event %s/%s", ev.Source, ev.EventID)
		}
		threads[i] = audit.EventThread(ev.Source, ev.EventID)
	}
	var open []string
	if err := s.namedSelect(ctx, tx, &open, "read threads", s.q.OutboxBatchOpenThreads,
		threadsArg{columnSet("thread", threads)}); err != nil {
		return false, err
	}
	w := newErrorWrites(open)
	var (
		chain []string        // the error's execution and what it retries, read for the first processing entry
		x     audit.Execution // the error's execution as the service keeps it, read for the first alert
		read  bool
	)
	for i, ev := range events {
		ent := ents[i]
		var err error
		w.roles = append(w.roles, actedRow{Source: ev.Source, EventID: ev.EventID, ExecutionID: e.ExecutionID})
		id := e.ID
		h := audit.HistoryLine{Source: ev.Source, EventID: ev.EventID, Kind: audit.KindError,
			ExecutionID: e.ExecutionID, RetryOf: e.RetryOf, WorkflowID: e.WorkflowID, WorkflowName: e.WorkflowName,
			Node: e.Node, Decision: e.Kind, Message: audit.Truncate(e.Message, 500), ErrorID: &id}
		acting := false
		if ent.Status == audit.StatusProcessing {
			if chain == nil {
				if chain, err = s.chainOf(ctx, tx, e.ExecutionID); err != nil {
					return false, err
				}
			}
			if acting, err = s.holdsAny(ctx, tx, ev, ent.Holder, ent.ItemCount > 0, chain); err != nil {
				return false, err
			}
			if !acting {
				why, err := s.whyNotActing(ctx, tx, ev, chain)
				if err != nil {
					return false, err
				}
				if e.RetryOf != "" && (len(chain) < 2 || audit.N8NID(chain[1]) != e.RetryOf) {
					why += fmt.Sprintf(" (reported as a retry of %s; n8n did not confirm it)", e.RetryOf)
				}
				h.Message = audit.Truncate(fmt.Sprintf("%s; the entry is not affected (holder %s): %s",
					why, ent.Holder, e.Message), 500)
			}
		}
		if !read && (acting || ent.Status != audit.StatusProcessing && w.open[threads[i]]) {
			err := s.get(ctx, tx, &x, "read execution", s.q.ExecutionRead, e.ExecutionID)
			if err != nil && !isNoRows(err) {
				return false, err
			}
			read = true
		}
		if err := w.onEntry(h, ent.eventState, ent.Holder, acting, x, now); err != nil {
			return false, err
		}
	}
	return len(w.outbox) > 0, s.writeErrors(ctx, tx, w, now)
}

// holdsAny reports whether an execution of chain holds the event, or one of
// its processing items; an entry nobody holds (written by SQL) counts as
// held by anyone.
func (s *Store) holdsAny(ctx context.Context, tx *sqlx.Tx, ev audit.EventKey, holder string, items bool, chain []string) (bool, error) {
	if holder == "" || slices.Contains(chain, holder) {
		return true, nil
	}
	if !items {
		return false, nil
	}
	var held bool
	_, err := s.namedGet(ctx, tx, &held, "read items", s.q.ItemHoldsAny,
		map[string]any{"source": ev.Source, "event_id": ev.EventID, "chain": chain})
	return held, err
}

// chainOf returns an execution and what it retries, by the lineage n8n
// confirmed.
func (s *Store) chainOf(ctx context.Context, q any, id string) ([]string, error) {
	var parent string
	if err := s.get(ctx, q, &parent, "read lineage", s.q.ExecutionReadRetryOf,
		id); err != nil && !isNoRows(err) {
		return nil, err
	}
	return s.chainFrom(ctx, q, id, parent)
}

// whyNotActing says what the execution of an error (or the one it retries)
// was told about the event.
func (s *Store) whyNotActing(ctx context.Context, tx *sqlx.Tx, ev audit.EventKey, chain []string) (string, error) {
	for _, id := range chain {
		var x struct {
			Acted    bool   `db:"acted"`
			Role     string `db:"role"`
			Decision string `db:"decision"`
		}
		err := s.get(ctx, tx, &x, "read execution", s.q.HistoryReadWhyNotActing,
			ev.Source, ev.EventID, id)
		switch {
		case isNoRows(err) || (err == nil && x.Role == "error"):
			continue
		case err != nil:
			return "", err
		case x.Acted:
			return fmt.Sprintf("error of execution %s, which acted before but no longer holds the entry", id), nil
		case x.Decision != "":
			return fmt.Sprintf("error of execution %s, which was told %s and did nothing",
				id, strings.ReplaceAll(x.Decision, "_", " ")), nil
		}
	}
	return fmt.Sprintf("error of execution %s, which does not hold the entry", chain[0]), nil
}

// alertUnlinked alerts about an error that belongs to no event (yet). Such
// errors are grouped by kind, workflow and node: the first of a repeat
// interval opens a thread, the others are counted in it.
func (s *Store) alertUnlinked(ctx context.Context, tx *sqlx.Tx, id int64, r audit.N8NErrorReport, now time.Time) error {
	if r.Kind == audit.N8NErrorTest {
		return nil
	}
	due := now
	if r.Kind == audit.N8NErrorExecution {
		due = now.Add(unlinkedGrace)
	}
	g, opened, err := s.joinGroup(ctx, tx, r, now)
	if err != nil {
		return err
	}
	a := audit.Alert{Kind: audit.AlertUnlinkedError, ErrorID: id, ErrorKind: r.Kind, WorkflowID: r.WorkflowID,
		WorkflowName: r.WorkflowName, Node: r.Node, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf,
		N8NURL: r.URL, Message: r.Message, At: now, Group: g.Key, GroupFrom: g.OpenedAt, GroupUntil: g.ClosesAt}
	if opened {
		return s.enqueue(ctx, tx, g.Thread, audit.RowAlert, a, now, due)
	}
	return s.repeatInGroup(ctx, tx, g, a, now, due)
}

// linkPendingErrors links the errors that arrived before the claim of their
// execution (or of an execution in its chain) to the claimed event. It
// reports whether it wrote an alert.
func (s *Store) linkPendingErrors(ctx context.Context, tx *sqlx.Tx, source, eventID string, chain []string, now time.Time) (bool, error) {
	query, args, err := sqlx.In(s.q.ErrorLinkPending,
		audit.N8NErrorExecution, audit.N8NErrorReconcile, audit.N8NErrorHook, chain, chain)
	if err != nil {
		return false, &audit.Error{Code: audit.CodeInternal, Message: "bind pending errors", Err: err}
	}
	var pending []audit.N8NErrorRecord
	if err := s.selectAll(ctx, tx, &pending, "find pending errors", query, args...); err != nil {
		return false, err
	}
	alerted := false
	ev := audit.EventKey{Source: source, EventID: eventID}
	for _, e := range pending {
		// The link is taken with a conditional update, so that an error is
		// linked once even when its claim and its payload race each other.
		n, err := s.namedExec(ctx, tx, "link error", s.q.ErrorLink,
			map[string]any{"id": e.ID, "source": source, "event_id": eventID})
		if err != nil {
			return false, err
		}
		if n == 0 {
			continue
		}
		wrote, err := s.attachError(ctx, tx, e, []audit.EventKey{ev}, now)
		if err != nil {
			return false, err
		}
		alerted = alerted || wrote
	}
	return alerted, nil
}

// KnownError reports whether an error with this dedupe key is recorded
// (for an execution: "exec:" and its id).
func (s *Store) KnownError(ctx context.Context, dedupeKey string) (bool, error) {
	var known bool
	err := s.get(ctx, s.db, &known, "read error",
		s.q.ErrorKnown, dedupeKey)
	return known, err
}

// Error returns one error record with its payload.
func (s *Store) Error(ctx context.Context, id int64) (audit.N8NErrorRecord, error) {
	var e audit.N8NErrorRecord
	err := s.get(ctx, s.db, &e, "read error", s.q.ErrorRead, id)
	if isNoRows(err) {
		return e, audit.Errorf(audit.CodeNotFound, "no error %d", id)
	}
	return e, err
}

// Errors lists error records, newest first, and returns the cursor of the
// next page (0 on the last).
func (s *Store) Errors(ctx context.Context, f audit.N8NErrorFilter) ([]audit.N8NErrorRecord, int64, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	before := f.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	var recs []audit.N8NErrorRecord
	err := s.selectAll(ctx, s.db, &recs, "list errors", s.q.ErrorList, before, f.Kind, f.Kind, f.Limit+1)
	if err != nil || len(recs) <= f.Limit {
		return recs, 0, err
	}
	return recs[:f.Limit], recs[f.Limit-1].ID, nil
}

// ErrorCounts returns how many errors of each kind are recorded.
func (s *Store) ErrorCounts(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Kind string `db:"kind"`
		N    int    `db:"n"`
	}
	if err := s.selectAll(ctx, s.db, &rows, "count errors",
		s.q.ErrorCount); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Kind] = r.N
	}
	return out, nil
}

// ExecutionErrors returns the errors of one execution.
func (s *Store) ExecutionErrors(ctx context.Context, id string) ([]audit.N8NErrorRecord, error) {
	var recs []audit.N8NErrorRecord
	err := s.selectAll(ctx, s.db, &recs, "read errors", s.q.ErrorListOfExecution, id)
	return recs, err
}
