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

// writeErrorRound records the decided payloads of a round: the errors, and
// for each one recorded now its history lines, the review of the entries its
// execution holds and the alerts; then it answers the duplicates, one by
// one, in the order they came.
func (s *Store) writeErrorRound(ctx context.Context, tx *sqlx.Tx, jobs []*errorJob, firstOf map[string]*errorJob,
	execs map[string]audit.Execution, entries map[string][]errorEntry, open []string, now time.Time) error {
	var w errorWrites
	for _, j := range jobs {
		r := j.req.rep
		if firstOf[r.ExecutionID] != j {
			continue
		}
		es := entries[r.ExecutionID]
		w.errors = append(w.errors, errorRow{DedupeKey: r.DedupeKey, Kind: r.Kind, ExecutionID: r.ExecutionID,
			WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Mode: r.Mode, Node: r.Node, Message: r.Message,
			HTTPCode: r.HTTPCode, URL: r.URL, Payload: r.Payload, Truncated: r.Truncated, Note: r.Note,
			Source: es[0].Source, EventID: es[0].EventID})
		for _, e := range es {
			w.history = append(w.history, historyRow{DedupeKey: r.DedupeKey, Source: e.Source, EventID: e.EventID,
				ExecutionID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node,
				Decision: r.Kind, Message: audit.Truncate(r.Message, 500)})
			if e.Status == audit.StatusProcessing {
				w.reviews = append(w.reviews, reviewRow{DedupeKey: r.DedupeKey, Source: e.Source, EventID: e.EventID,
					Holder: e.Holder})
			}
		}
	}
	var inserted []struct {
		ID        int64  `db:"id"`
		DedupeKey string `db:"dedupe_key"`
	}
	if err := s.namedSelect(ctx, tx, &inserted, "record errors", s.q.ErrorBatchInsert, errorInsertArgs{
		Errors: rowSet(w.errors), History: rowSet(w.history), Reviews: rowSet(w.reviews), Now: s.t(now)}); err != nil {
		return err
	}
	ids := make(map[string]int64, len(inserted))
	for _, e := range inserted {
		ids[e.DedupeKey] = e.ID
	}
	// What the errors recorded now leave, the history and the review for
	// the statements that did not write them with the errors (SQLite).
	w.history = slices.DeleteFunc(w.history, func(h historyRow) bool { return ids[h.DedupeKey] == 0 })
	for i := range w.history {
		w.history[i].ErrorID = ids[w.history[i].DedupeKey]
	}
	w.reviews = slices.DeleteFunc(w.reviews, func(r reviewRow) bool { return ids[r.DedupeKey] == 0 })
	counterAt := map[[3]string]int{}
	for _, j := range jobs {
		r := j.req.rep
		id := ids[r.DedupeKey]
		if firstOf[r.ExecutionID] != j || id == 0 {
			continue
		}
		es := entries[r.ExecutionID]
		res := audit.N8NErrorResult{ID: id, Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf,
			Linked: &audit.EventKey{Source: es[0].Source, EventID: es[0].EventID}}
		j.res, j.after = res, s.afterError(res)
		for _, e := range es {
			h := audit.HistoryLine{Source: e.Source, EventID: e.EventID, Kind: audit.KindError, ExecutionID: r.ExecutionID,
				RetryOf: r.RetryOf, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node,
				Decision: r.Kind, Message: audit.Truncate(r.Message, 500), ErrorID: &id}
			thread := audit.EventThread(e.Source, e.EventID)
			kind := audit.AlertNews // followUp: news for a thread people were alerted in
			if e.Status == audit.StatusProcessing {
				kind = audit.AlertExecutionError // alertEvent: the holder's error
			} else if !slices.Contains(open, thread) {
				continue
			}
			a := eventAlertOf(kind, h, e.eventState, execs[r.ExecutionID], now)
			if err := w.alert(thread, a, slices.Contains(open, thread), now, counterAt); err != nil {
				return err
			}
		}
	}
	steps := []writeStep{{"write history", s.q.HistoryBatchInsertErrors}, {"mark for review", s.q.EventBatchMarkErrors}}
	if len(w.outbox) > 0 {
		steps = append(steps, writeStep{"write outbox", s.q.ErrorBatchWrite}, writeStep{"write outbox", s.q.OutboxBatchInsert},
			writeStep{"count", s.q.StatsBatchAdd})
	}
	sortCounters(w.counters)
	if err := s.writeAll(ctx, tx, errorWriteArgs{History: rowSet(w.history), Reviews: rowSet(w.reviews),
		Outbox: rowSet(w.outbox), Counters: rowSet(w.counters), Now: s.t(now),
		Hour: s.t(now.UTC().Truncate(time.Hour)), Shard: s.shard(tx)}, steps...); err != nil {
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
		j.res, j.after = res, s.afterError(res)
	}
	return nil
}

// alert adds the rows of an alert about an event: a reply in its thread
// when one is open, else the alert that opens it, counted (as alertEvent
// and followUp write them).
func (w *errorWrites) alert(thread string, a audit.Alert, open bool, now time.Time, counterAt map[[3]string]int) error {
	if open {
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
	key := [3]string{a.Source, a.WorkflowID, audit.MetricAlert + a.Kind}
	if at, ok := counterAt[key]; ok {
		w.counters[at].N++
		return nil
	}
	counterAt[key] = len(w.counters)
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
		DedupeKey string `json:"dedupe_key"`
		Source    string `json:"source"`
		EventID   string `json:"event_id"`
		Holder    string `json:"holder"`
	}
)

// errorWrites are the rows of a round's payloads recorded.
type errorWrites struct {
	errors   []errorRow
	history  []historyRow
	reviews  []reviewRow
	outbox   []outboxRow
	counters []counterRow
}

// The named parameters of a round's statements.
type (
	errorRoundArgs struct {
		Executions string `db:"executions"`
		Now        any    `db:"now"`
	}
	errorInsertArgs struct {
		Errors  string `db:"errors"`
		History string `db:"history"`
		Reviews string `db:"reviews"`
		Now     any    `db:"now"`
	}
	errorWriteArgs struct {
		History  string `db:"history"`
		Reviews  string `db:"reviews"`
		Outbox   string `db:"outbox"`
		Counters string `db:"counters"`
		Now      any    `db:"now"`
		Hour     any    `db:"hour"`
		Shard    int    `db:"shard"`
	}
)
