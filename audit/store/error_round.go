package store

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// plainError reports whether a payload may be recorded in a set-based round
// for what it says: an execution's error, deduplicated by the execution's
// id as n8n gives it, with no retryOf, and n8n's API not configured for its
// instance or unable to answer, so that the payload's word is all there is
// to record of the execution, and no start time judges it.
func plainError(in errorInput) bool {
	r := in.rep
	return r.Kind == audit.N8NErrorExecution && r.ExecutionID != "" && audit.N8NID(r.ExecutionID) == r.ExecutionID &&
		r.DedupeKey == "exec:"+r.ExecutionID && r.RetryOf == "" && (!in.self.asked || in.self.err != nil)
}

// plainErrors returns the payloads of a batch that a round may record: plain
// ones of an execution the service knows as itself (its id not reused, no
// lineage n8n confirmed) and judges the same execution, as the batch
// begins. A payload of an execution that a payload before it in the batch
// names goes in a round only when all those before it did and say the same
// of the execution: then what they wrote of it leaves it as judged here.
func (s *Store) plainErrors(ctx context.Context, tx *sqlx.Tx, jobs []*errorJob, now time.Time) (map[*errorJob]bool, error) {
	var candidates []*errorJob
	for _, j := range jobs {
		if plainError(j.req) {
			candidates = append(candidates, j)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	execs, err := s.readExecutions(ctx, tx, uniqueColumn(candidates, func(j *errorJob) string { return j.req.rep.ExecutionID }))
	if err != nil {
		return nil, err
	}
	plain := map[*errorJob]bool{}
	first := map[string]audit.N8NErrorReport{} // the first payload of each execution in the batch
	spoilt := map[string]bool{}                // executions named by a payload that is not plain
	for _, j := range jobs {
		r := j.req.rep
		f, named := first[r.ExecutionID]
		if !named {
			first[r.ExecutionID] = r
		}
		k, known := execs[r.ExecutionID]
		ok := plainError(j.req) && !spoilt[r.ExecutionID] && (!named || sameSighting(f, r)) &&
			known && k.ID == r.ExecutionID && k.RetryOf == ""
		if ok {
			verdict, _ := audit.Judge(k.domain(), audit.Sighting{Kind: audit.SeenError, WorkflowID: r.WorkflowID}, now, s.maxRun)
			ok = verdict == audit.SameExecution
		}
		if !ok {
			spoilt[r.ExecutionID] = true
			continue
		}
		plain[j] = true
	}
	return plain, nil
}

// sameSighting reports whether two payloads say the same of their execution.
func sameSighting(a, b audit.N8NErrorReport) bool {
	return a.WorkflowID == b.WorkflowID && a.WorkflowName == b.WorkflowName && a.Mode == b.Mode && a.URL == b.URL
}

// errorEntry is an entry that an execution of a round touched, as locked.
type errorEntry struct {
	ExecutionID string `db:"execution_id"`
	Source      string `db:"source"`
	EventID     string `db:"event_id"`
	Holder      string `db:"holder_execution_id"`
	eventState
}

// errorRound records, set-based, plain payloads (plainErrors) in the order
// they came, and returns how many of them, from the first, it decided: the
// caller records the next one alone. It writes their executions, then
// (in a statement of its own, so that a claim of the execution committed
// meanwhile is seen: the claim waited for the write) reads the entries they
// touched, under their lock. It goes as far as the payloads whose
// execution touched an entry and whose entries the round alone changes: an
// entry being processed is held by the execution or by nobody (the error is
// the holder's), and no payload before it in the round touched it. A later
// payload of an execution of the round is answered as the duplicate it is,
// as is one whose key was recorded before.
func (s *Store) errorRound(ctx context.Context, tx *sqlx.Tx, jobs []*errorJob, now time.Time) (int, error) {
	firstOf := map[string]*errorJob{}
	var executions []errorExecutionRow
	for _, j := range jobs {
		r := j.req.rep
		if _, ok := firstOf[r.ExecutionID]; ok {
			continue
		}
		firstOf[r.ExecutionID] = j
		executions = append(executions, errorExecutionRow{ID: r.ExecutionID, WorkflowID: r.WorkflowID,
			WorkflowName: r.WorkflowName, Mode: r.Mode, URL: r.URL})
	}
	// Rows in key order, so that two batches lock them in the same order.
	slices.SortFunc(executions, func(a, b errorExecutionRow) int { return cmp.Compare(a.ID, b.ID) })
	arg := errorRoundArgs{Executions: rowSet(executions), Now: s.t(now)}
	var seen []audit.Execution
	if err := s.namedSelect(ctx, tx, &seen, "record executions", s.q.ExecutionBatchErrorSeen, arg); err != nil {
		return 0, err
	}
	execs := make(map[string]audit.Execution, len(seen))
	for _, x := range seen {
		execs[x.ID] = x
	}
	var touched []errorEntry
	if err := s.namedSelect(ctx, tx, &touched, "find events", s.q.EventExecutionBatchEvents, arg); err != nil {
		return 0, err
	}
	entries := map[string][]errorEntry{}
	var threads []string
	for _, e := range touched {
		entries[e.ExecutionID] = append(entries[e.ExecutionID], e)
		threads = append(threads, audit.EventThread(e.Source, e.EventID))
	}
	var open []string
	if len(threads) > 0 {
		if err := s.namedSelect(ctx, tx, &open, "read threads", s.q.OutboxBatchOpenThreads, threadsArg{columnSet("thread", threads)}); err != nil {
			return 0, err
		}
	}
	n := decidedErrors(jobs, firstOf, execs, entries)
	if n == 0 {
		return 0, nil
	}
	jobs = jobs[:n]
	if err := s.writeErrorRound(ctx, tx, jobs, firstOf, execs, entries, open, now); err != nil {
		return 0, err
	}
	return n, nil
}

// decidedErrors returns how many payloads of a round, from the first, the
// round records (see errorRound).
func decidedErrors(jobs []*errorJob, firstOf map[string]*errorJob, execs map[string]audit.Execution,
	entries map[string][]errorEntry) int {
	taken := map[audit.EventKey]bool{}
	for n, j := range jobs {
		id := j.req.rep.ExecutionID
		if firstOf[id] != j {
			continue // a copy: nothing to decide
		}
		x, ok := execs[id]
		es := entries[id]
		if !ok || x.RetryOf != "" || len(es) == 0 {
			return n // superseded or gone, lineage learned meanwhile, or no event: alone
		}
		for _, e := range es {
			if taken[audit.EventKey{Source: e.Source, EventID: e.EventID}] ||
				e.Status == audit.StatusProcessing && e.Holder != "" && e.Holder != id {
				return n
			}
		}
		for _, e := range es {
			taken[audit.EventKey{Source: e.Source, EventID: e.EventID}] = true
		}
	}
	return len(jobs)
}

// writeErrorRound records the decided payloads of a round: the errors,
// then for each one recorded now what it writes on the entries its
// execution touched (onEntry); then it answers the duplicates, one by one,
// in the order they came.
func (s *Store) writeErrorRound(ctx context.Context, tx *sqlx.Tx, jobs []*errorJob, firstOf map[string]*errorJob,
	execs map[string]audit.Execution, entries map[string][]errorEntry, open []string, now time.Time) error {
	var rows []errorRow
	for _, j := range jobs {
		r := j.req.rep
		if firstOf[r.ExecutionID] != j {
			continue
		}
		es := entries[r.ExecutionID]
		rows = append(rows, errorRowOf(r, r.ExecutionID, audit.EventKey{Source: es[0].Source, EventID: es[0].EventID}))
	}
	ids, err := s.insertErrors(ctx, tx, rows, now)
	if err != nil {
		return err
	}
	w := newErrorWrites(open)
	for _, j := range jobs {
		r := j.req.rep
		id := ids[r.DedupeKey]
		if firstOf[r.ExecutionID] != j || id == 0 {
			continue
		}
		es := entries[r.ExecutionID]
		res := audit.N8NErrorResult{ID: id, Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf,
			Linked: &audit.EventKey{Source: es[0].Source, EventID: es[0].EventID}}
		rows := len(w.outbox)
		for _, e := range es {
			h := audit.HistoryLine{Source: e.Source, EventID: e.EventID, Kind: audit.KindError, ExecutionID: r.ExecutionID,
				RetryOf: r.RetryOf, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node,
				Decision: r.Kind, Message: audit.Truncate(r.Message, 500), ErrorID: &id}
			// The round took only entries its executions hold, or nobody
			// does (decidedErrors): the error bears on their outcome.
			if err := w.onEntry(h, e.eventState, e.Holder, true, execs[r.ExecutionID], now); err != nil {
				return err
			}
		}
		j.res, j.after = res, s.afterError(res, len(w.outbox) > rows)
	}
	if err := s.writeErrors(ctx, tx, w, now); err != nil {
		return err
	}
	for _, j := range jobs {
		r := j.req.rep
		if firstOf[r.ExecutionID] == j && ids[r.DedupeKey] != 0 {
			continue
		}
		res, err := s.duplicateError(ctx, tx, r)
		if err != nil {
			return err
		}
		j.res, j.after = res, s.afterError(res, false)
	}
	return nil
}

// errorRowOf is the row of a report recorded as an error of the lineage
// whose first execution is root, linked to the event ev (none: the zero
// key).
func errorRowOf(r audit.N8NErrorReport, root string, ev audit.EventKey) errorRow {
	return errorRow{DedupeKey: r.DedupeKey, Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf, Root: root,
		WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Mode: r.Mode, Node: r.Node, Message: r.Message,
		HTTPCode: r.HTTPCode, URL: r.URL, Payload: r.Payload, Truncated: r.Truncated, Note: r.Note,
		Source: ev.Source, EventID: ev.EventID}
}

// insertErrors records errors, a round's or one report's, and returns the
// ids of those recorded now by dedupe key: one whose key was recorded
// before is not among them.
func (s *Store) insertErrors(ctx context.Context, tx *sqlx.Tx, rows []errorRow, now time.Time) (map[string]int64, error) {
	var inserted []struct {
		ID        int64  `db:"id"`
		DedupeKey string `db:"dedupe_key"`
	}
	if err := s.namedSelect(ctx, tx, &inserted, "record errors", s.q.ErrorBatchInsert, errorInsertArgs{
		Errors: rowSet(rows), Now: s.t(now)}); err != nil {
		return nil, err
	}
	ids := make(map[string]int64, len(inserted))
	for _, e := range inserted {
		ids[e.DedupeKey] = e.ID
	}
	return ids, nil
}

// onEntry adds what an error writes on an entry it is linked to, as the
// entry stands (e, held by holder): its history line h; when the error
// bears on the entry's outcome (acting: it is the error of the execution
// that holds the processing entry, or of a Retry of that execution), the
// entry's review and the alert about the error, which opens the event's
// thread or replies in it; for a settled entry, news in the thread when
// people were alerted about the event. The error of an execution that does
// not hold a processing entry says nothing of its outcome: the history line
// alone. x is the error's execution, as the service keeps it.
func (w *errorWrites) onEntry(h audit.HistoryLine, e eventState, holder string, acting bool, x audit.Execution,
	now time.Time) error {
	w.history = append(w.history, historyRow{Source: h.Source, EventID: h.EventID, ExecutionID: h.ExecutionID,
		RetryOf: h.RetryOf, WorkflowID: h.WorkflowID, WorkflowName: h.WorkflowName, Node: h.Node,
		Decision: h.Decision, Message: h.Message, ErrorID: *h.ErrorID})
	thread := audit.EventThread(h.Source, h.EventID)
	kind := audit.AlertNews
	switch {
	case e.Status == audit.StatusProcessing && acting:
		w.reviews = append(w.reviews, reviewRow{Source: h.Source, EventID: h.EventID, Holder: holder})
		kind = audit.AlertExecutionError
	case e.Status == audit.StatusProcessing, !w.open[thread]:
		return nil
	}
	return w.alert(thread, eventAlertOf(kind, h, e, x, now), now)
}

// writeErrors writes what errors write on their entries (onEntry), and the
// executions they make part of their events: on PostgreSQL in one
// statement, on SQLite one table at a time.
func (s *Store) writeErrors(ctx context.Context, tx *sqlx.Tx, w *errorWrites, now time.Time) error {
	if len(w.history) == 0 && len(w.outbox) == 0 {
		return nil
	}
	var steps []writeStep
	if len(w.roles) > 0 {
		steps = append(steps, writeStep{"record executions", s.q.EventExecutionBatchRecordErrors})
	}
	steps = append(steps, writeStep{"write history", s.q.HistoryBatchInsertErrors})
	if len(w.reviews) > 0 {
		steps = append(steps, writeStep{"mark for review", s.q.EventBatchMarkErrors})
	}
	if len(w.outbox) > 0 {
		steps = append(steps, writeStep{"write outbox", s.q.OutboxBatchInsert}, writeStep{"count", s.q.StatsBatchAdd})
	}
	steps = append(steps, writeStep{"write errors", s.q.ErrorBatchWrite})
	sortCounters(w.counters)
	return s.writeAll(ctx, tx, errorWriteArgs{Roles: rowSet(w.roles), History: rowSet(w.history),
		Reviews: rowSet(w.reviews), Outbox: rowSet(w.outbox), Counters: rowSet(w.counters), Now: s.t(now),
		Hour: s.t(now.UTC().Truncate(time.Hour)), Shard: s.shard(tx)}, steps...)
}

// alert adds the rows of an alert about an event: a reply in its thread
// when one is open, else the alert that opens it, counted (as alertEvent
// and followUp write them).
func (w *errorWrites) alert(thread string, a audit.Alert, now time.Time) error {
	if w.open[thread] {
		for _, m := range []struct {
			kind string
			a    audit.Alert
		}{{audit.RowFollowup, a}, {audit.RowRefresh, refreshOf(a, now)}} {
			row, err := outboxRowOf(thread, m.kind, m.a)
			if err != nil {
				return err
			}
			w.outbox = append(w.outbox, row)
		}
		return nil
	}
	row, err := outboxRowOf(thread, audit.RowAlert, a)
	if err != nil {
		return err
	}
	w.outbox = append(w.outbox, row)
	w.open[thread] = true
	key := [3]string{a.Source, a.WorkflowID, audit.MetricAlert + a.Kind}
	if at, ok := w.counterAt[key]; ok {
		w.counters[at].N++
		return nil
	}
	w.counterAt[key] = len(w.counters)
	w.counters = append(w.counters, counterRow{Source: key[0], WorkflowID: key[1], Metric: key[2], N: 1})
	return nil
}

// The rows a round of error payloads writes, each set marshalled once as
// JSON and read by name by the statements.
type (
	errorExecutionRow struct {
		ID           string `json:"id"`
		WorkflowID   string `json:"workflow_id"`
		WorkflowName string `json:"workflow_name"`
		Mode         string `json:"mode"`
		URL          string `json:"url"`
	}
	errorRow struct {
		DedupeKey    string `json:"dedupe_key"`
		Kind         string `json:"kind"`
		ExecutionID  string `json:"execution_id"`
		RetryOf      string `json:"retry_of"`
		Root         string `json:"root"`
		WorkflowID   string `json:"workflow_id"`
		WorkflowName string `json:"workflow_name"`
		Mode         string `json:"mode"`
		Node         string `json:"node"`
		Message      string `json:"message"`
		HTTPCode     string `json:"http_code"`
		URL          string `json:"url"`
		Payload      string `json:"payload"`
		Truncated    bool   `json:"truncated"`
		Note         string `json:"note"`
		Source       string `json:"source"`
		EventID      string `json:"event_id"`
	}
	reviewRow struct {
		Source  string `json:"source"`
		EventID string `json:"event_id"`
		Holder  string `json:"holder"`
	}
)

// errorWrites are the rows errors write on their entries: a round's
// payloads, one report's, or the errors a claim links.
type errorWrites struct {
	roles     []actedRow // executions an error makes part of an event
	history   []historyRow
	reviews   []reviewRow
	outbox    []outboxRow
	counters  []counterRow
	counterAt map[[3]string]int // a counter's row, by its key
	open      map[string]bool   // threads with an alert, this one's included
}

// newErrorWrites starts the rows of errors whose events have these threads
// open.
func newErrorWrites(open []string) *errorWrites {
	w := &errorWrites{counterAt: map[[3]string]int{}, open: map[string]bool{}}
	for _, t := range open {
		w.open[t] = true
	}
	return w
}

// The named parameters of a round's statements.
type (
	errorRoundArgs struct {
		Executions string `db:"executions"`
		Now        any    `db:"now"`
	}
	errorInsertArgs struct {
		Errors string `db:"errors"`
		Now    any    `db:"now"`
	}
	errorWriteArgs struct {
		Roles    string `db:"roles"`
		History  string `db:"history"`
		Reviews  string `db:"reviews"`
		Outbox   string `db:"outbox"`
		Counters string `db:"counters"`
		Now      any    `db:"now"`
		Hour     any    `db:"hour"`
		Shard    int    `db:"shard"`
	}
)
