package store

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// plainReports returns the reports of a batch that the set-based round may
// decide: the first report of its event in the batch, queued without
// lineage (none to learn: the batch found no other holder), of an event
// without items, done or failed (unknown alerts), from an execution named
// by no other report of the batch.
func plainReports(jobs []*outcomeJob, needs map[*outcomeJob]bool) []*outcomeJob {
	perExecution := map[string]int{}
	for _, j := range jobs {
		perExecution[j.req.req.ExecutionID]++
	}
	seen := map[audit.EventKey]bool{}
	var plain []*outcomeJob
	for _, j := range jobs {
		r := j.req.req
		k := audit.EventKey{Source: r.Source, EventID: r.EventID}
		first := !seen[k]
		seen[k] = true
		if first && !needs[j] && !j.req.learned && r.Item == "" && r.Outcome != audit.OutcomeUnknown &&
			perExecution[r.ExecutionID] == 1 {
			plain = append(plain, j)
		}
	}
	return plain
}

// outcomeRound decides, set-based, the plain reports whose reporter the
// service knows as itself, root of its lineage, and which hold their entry:
// the fenced transition for all, then one write (finished). It returns the
// reports it decided; the rest wrote nothing, and the batch runs those
// alone (reportOutcome), as it runs the rest.
func (s *Store) outcomeRound(ctx context.Context, tx *sqlx.Tx, jobs []*outcomeJob, execs map[string]knownExecution,
	now time.Time) (decided map[*outcomeJob]bool, err error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if execs == nil { // not read with the lock (SQLite)
		if execs, err = s.readExecutions(ctx, tx, uniqueColumn(jobs, func(j *outcomeJob) string { return j.req.req.ExecutionID })); err != nil {
			return nil, err
		}
	}
	var reps []*report
	of := map[*report]*outcomeJob{}
	for _, j := range jobs {
		r := j.req.req
		k, ok := execs[r.ExecutionID]
		if !ok || k.ID != r.ExecutionID || audit.N8NID(r.ExecutionID) != r.ExecutionID || k.RetryOf != "" ||
			s.lookup != nil && k.stale(now) {
			continue // identify may ask n8n, start a new incarnation, or walk a chain: alone
		}
		seen := audit.Sighting{Kind: audit.SeenOutcome, WorkflowID: r.WorkflowID}
		if verdict, _ := audit.Judge(k.domain(), seen, now, s.maxRun); verdict != audit.SameExecution {
			continue
		}
		rep := &report{req: r, chain: []string{r.ExecutionID}, workflow: cmp.Or(r.WorkflowID, k.WorkflowID)}
		reps = append(reps, rep)
		of[rep] = j
	}
	if len(reps) == 0 {
		return nil, nil
	}
	changed, err := s.finishReports(ctx, tx, reps, now)
	if err != nil || len(changed) == 0 {
		return nil, err
	}
	if err := s.finished(ctx, tx, changed, now); err != nil {
		return nil, err
	}
	decided = map[*outcomeJob]bool{}
	for _, rep := range changed {
		j := of[rep]
		decided[j] = true
		j.res, j.err = rep.res, nil
		j.after = s.afterOutcome(j.req.req, rep.res, nil, rep.alerted)
	}
	return decided, nil
}

// report is an outcome report as a round finishes it.
type report struct {
	req      audit.OutcomeRequest // its ExecutionID the execution as the service keeps it (31~2)
	chain    []string             // the reporter, then what it retries (n8n's lineage); empty: not the known one
	note     string               // what the history says of its lineage
	workflow string               // the reporter's workflow, as the service knows it: its counters'
	// recorded: its execution was recorded with what n8n said of it
	// (recordReporter), not seen by the round's write.
	recorded   bool
	e          finishState
	threadOpen sql.NullBool // people were alerted about its event (EventBatchFinish; NULL: not read)
	res        audit.OutcomeResult
	alerted    bool
}

// finishReports runs the fenced transition of reports of distinct entries
// whose chains are known: the events' in one statement (EventBatchFinish),
// the items' one at a time. It returns, in their order, the reports that
// moved their entry, with the entry as they left it; the others changed
// nothing.
func (s *Store) finishReports(ctx context.Context, tx *sqlx.Tx, reps []*report, now time.Time) ([]*report, error) {
	moved := map[*report]bool{}
	var rows []finishRow
	byKey := map[audit.EventKey]*report{}
	for _, rep := range reps {
		r := rep.req
		if r.Item != "" {
			q := s.q.itemFinish()
			update := q.finish
			if r.Outcome == audit.OutcomeUnknown {
				update = q.unknown
			}
			a := s.fence(rep, now)
			ok, err := s.namedGet(ctx, tx, &rep.e, "report outcome", update, a)
			if err != nil {
				return nil, err
			}
			if ok && r.Outcome == audit.OutcomeUnknown {
				if _, err = s.namedExec(ctx, tx, "mark for review", s.q.EventReviewUnknown, a); err != nil {
					return nil, err
				}
			}
			moved[rep] = ok
			continue
		}
		byKey[audit.EventKey{Source: r.Source, EventID: r.EventID}] = rep
		rows = append(rows, finishRow{Source: r.Source, EventID: r.EventID, Status: string(r.Outcome),
			Reporter: r.ExecutionID, Chain: rep.chain, CRMRef: r.CRMRef, Thread: audit.EventThread(r.Source, r.EventID)})
	}
	if len(rows) > 0 {
		var got []struct {
			audit.EventKey
			Status       audit.Status `db:"status"`
			Holder       string       `db:"holder_execution_id"`
			ReviewReason string       `db:"review_reason"`
			// ThreadOpen: people were alerted about the event (NULL on
			// SQLite, whose RETURNING sees only the entry: read after).
			ThreadOpen sql.NullBool `db:"thread_open"`
		}
		if err := s.namedSelect(ctx, tx, &got, "report outcome", s.q.EventBatchFinish,
			finishArgs{Reports: rowSet(rows), Now: s.t(now)}); err != nil {
			return nil, err
		}
		for _, f := range got {
			rep := byKey[f.EventKey]
			rep.e = finishState{entryState: entryState{Status: f.Status, Holder: f.Holder}, ReviewReason: f.ReviewReason}
			rep.threadOpen = f.ThreadOpen
			moved[rep] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(reps), func(rep *report) bool { return !moved[rep] }), nil
}

// finished writes what reports that moved their entries leave, in one
// write: an item event rolled up from its items, the reporters' executions
// seen (those not recorded alone), the reporters of the events, the
// history lines, the counters (a Retry's too: n8n's Retry shows itself only
// here, it does not claim again); then an unknown outcome's alert, or news
// in an alerted event's thread. It sets each report's answer.
func (s *Store) finished(ctx context.Context, tx *sqlx.Tx, reps []*report, now time.Time) error {
	var w outcomeWrites
	counterAt := map[[3]string]int{}
	lines := make([]audit.HistoryLine, len(reps))
	for i, rep := range reps {
		r := rep.req
		if r.Item != "" {
			if _, _, err := s.rollUp(ctx, tx, r.Source, r.EventID, "", now); err != nil {
				return err
			}
		}
		rep.res = audit.OutcomeResult{Changed: true, Status: rep.e.Status,
			NeedsReview: rep.e.Status == audit.StatusProcessing && rep.e.ReviewReason != "",
			Message:     reporterMessage(r, rep.chain, rep.note)}
		h := audit.HistoryLine{Source: r.Source, EventID: r.EventID, Item: r.Item, Kind: audit.KindOutcome,
			ExecutionID: r.ExecutionID, Decision: string(r.Outcome), Status: string(rep.e.Status),
			Message: rep.res.Message, CRMRef: r.CRMRef}
		metrics := []string{audit.MetricOutcome + string(r.Outcome)}
		if len(rep.chain) > 1 {
			h.RetryOf = rep.chain[1]
			metrics = append(metrics, audit.MetricRetry)
		}
		lines[i] = h
		if !rep.recorded {
			w.executions = append(w.executions, seenRow{ID: r.ExecutionID, WorkflowID: r.WorkflowID})
		}
		w.reporters = append(w.reporters, actedRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID})
		w.history = append(w.history, historyRow{Source: h.Source, EventID: h.EventID, Item: h.Item,
			ExecutionID: h.ExecutionID, RetryOf: h.RetryOf, Decision: h.Decision, Status: h.Status, Message: h.Message,
			CRMRef: h.CRMRef})
		for _, m := range metrics {
			key := [3]string{r.Source, rep.workflow, m}
			if at, ok := counterAt[key]; ok {
				w.counters[at].N++
				continue
			}
			counterAt[key] = len(w.counters)
			w.counters = append(w.counters, counterRow{Source: key[0], WorkflowID: key[1], Metric: key[2], N: 1})
		}
	}
	if err := s.writeOutcomes(ctx, tx, w, now); err != nil {
		return err
	}
	open, err := s.openThreads(ctx, tx, reps)
	if err != nil {
		return err
	}
	for i, rep := range reps {
		h := lines[i]
		switch {
		case rep.req.Outcome == audit.OutcomeUnknown:
			rep.alerted = true
			if err := s.alertEvent(ctx, tx, audit.AlertUnknown, h, now); err != nil {
				return err
			}
		case open[audit.EventKey{Source: h.Source, EventID: h.EventID}]:
			if rep.alerted, err = s.followUp(ctx, tx, h, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// openThreads says which of the reports' events people were alerted about
// (an alert in its thread), as EventBatchFinish read it, or read here.
func (s *Store) openThreads(ctx context.Context, tx *sqlx.Tx, reps []*report) (map[audit.EventKey]bool, error) {
	open := map[audit.EventKey]bool{}
	var threads []string
	for _, rep := range reps {
		k := audit.EventKey{Source: rep.req.Source, EventID: rep.req.EventID}
		switch {
		case rep.req.Outcome == audit.OutcomeUnknown:
		case rep.threadOpen.Valid:
			open[k] = open[k] || rep.threadOpen.Bool
		default:
			threads = append(threads, audit.EventThread(k.Source, k.EventID))
		}
	}
	if len(threads) == 0 {
		return open, nil
	}
	var keys []string
	if err := s.namedSelect(ctx, tx, &keys, "read threads", s.q.OutboxBatchOpenThreads, threadsArg{columnSet("thread", threads)}); err != nil {
		return nil, err
	}
	for _, rep := range reps {
		k := audit.EventKey{Source: rep.req.Source, EventID: rep.req.EventID}
		if slices.Contains(keys, audit.EventThread(k.Source, k.EventID)) {
			open[k] = true
		}
	}
	return open, nil
}

// finishRow is one report of a round, for EventBatchFinish.
type finishRow struct {
	Source   string   `json:"source"`
	EventID  string   `json:"event_id"`
	Status   string   `json:"status"`
	Reporter string   `json:"reporter"`
	Chain    []string `json:"chain"` // the reporter, then what it retries
	CRMRef   string   `json:"crm_ref"`
	Thread   string   `json:"thread"` // its alerts' thread (audit.EventThread)
}

type finishArgs struct {
	Reports string `db:"reports"`
	Now     any    `db:"now"`
}

// seenRow is an execution a round of outcomes saw.
type seenRow struct {
	ID         string `json:"id"`
	WorkflowID string `json:"workflow_id"`
}

// outcomeWrites are the rows a round of finished reports writes.
type outcomeWrites struct {
	executions []seenRow
	reporters  []actedRow
	history    []historyRow
	counters   []counterRow
}

// outcomeWriteArgs are the named parameters of the round's write.
type outcomeWriteArgs struct {
	Executions string `db:"executions"`
	Reporters  string `db:"reporters"`
	History    string `db:"history"`
	Counters   string `db:"counters"`
	Now        any    `db:"now"`
	Hour       any    `db:"hour"`
	Shard      int    `db:"shard"`
}

// writeOutcomes writes what a round of finished reports leaves: the
// reporters' executions seen, the reporters of the events, the history and
// the counters. PostgreSQL writes them in one statement, SQLite one table
// at a time.
func (s *Store) writeOutcomes(ctx context.Context, tx *sqlx.Tx, w outcomeWrites, now time.Time) error {
	slices.SortFunc(w.executions, func(a, b seenRow) int { return cmp.Compare(a.ID, b.ID) })
	sortCounters(w.counters)
	args := outcomeWriteArgs{Executions: rowSet(w.executions), Reporters: rowSet(w.reporters), History: rowSet(w.history),
		Counters: rowSet(w.counters), Now: s.t(now), Hour: s.t(now.UTC().Truncate(time.Hour)), Shard: s.shard(tx)}
	return s.writeAll(ctx, tx, args,
		writeStep{"write outcomes", s.q.OutcomeBatchWrite},
		writeStep{"record execution", s.q.ExecutionBatchSeen},
		writeStep{"record reporter", s.q.EventExecutionBatchReporters},
		writeStep{"write history", s.q.HistoryBatchInsertOutcomes},
		writeStep{"count", s.q.StatsBatchAdd})
}

// namedSelect runs a query with named parameters and scans its rows into
// dest.
func (s *Store) namedSelect(ctx context.Context, q any, dest any, op, query string, arg any) error {
	query, args, err := bindNamed(query, arg)
	if err != nil {
		return &audit.Error{Code: audit.CodeInternal, Message: op + ": bind", Err: err}
	}
	return s.selectAll(ctx, q, dest, op, query, args...)
}
