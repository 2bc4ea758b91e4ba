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
// the fenced transition for all, then one write. It returns the reports it
// did not decide, having written nothing for them: the batch runs those
// one by one, as it runs the rest.
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
	known := map[*outcomeJob]knownExecution{}
	var reports []finishRow
	for _, j := range jobs {
		r := j.req.req
		k, ok := execs[r.ExecutionID]
		if !ok || k.ID != r.ExecutionID || audit.N8NID(r.ExecutionID) != r.ExecutionID || k.RetryOf != "" ||
			s.lookup != nil && k.stale(now) {
			continue // identify may ask n8n, start a new incarnation, or walk a chain: one by one
		}
		seen := audit.Sighting{Kind: audit.SeenOutcome, WorkflowID: r.WorkflowID}
		if verdict, _ := audit.Judge(k.domain(), seen, now, s.maxRun); verdict != audit.SameExecution {
			continue
		}
		known[j] = k
		reports = append(reports, finishRow{Source: r.Source, EventID: r.EventID, Status: string(r.Outcome),
			Reporter: r.ExecutionID, CRMRef: r.CRMRef, Thread: audit.EventThread(r.Source, r.EventID)})
	}
	if len(reports) == 0 {
		return nil, nil
	}
	var finished []struct {
		audit.EventKey
		Status       audit.Status `db:"status"`
		Holder       string       `db:"holder_execution_id"`
		ReviewReason string       `db:"review_reason"`
		// ThreadOpen: people were alerted about the event (NULL on
		// SQLite, whose RETURNING sees only the entry: read after).
		ThreadOpen sql.NullBool `db:"thread_open"`
	}
	if err := s.namedSelect(ctx, tx, &finished, "report outcome", s.q.EventBatchFinish,
		finishArgs{Reports: rowSet(reports), Now: s.t(now)}); err != nil {
		return nil, err
	}
	state := make(map[audit.EventKey]int, len(finished))
	for i, f := range finished {
		state[f.EventKey] = i
	}
	decided = map[*outcomeJob]bool{}
	var done []*outcomeJob
	var open map[audit.EventKey]bool // nil: to be read
	if len(finished) > 0 && finished[0].ThreadOpen.Valid {
		open = make(map[audit.EventKey]bool, len(finished))
		for _, f := range finished {
			open[f.EventKey] = f.ThreadOpen.Bool
		}
	}
	var w outcomeWrites
	counterAt := map[[3]string]int{}
	for _, j := range jobs {
		r := j.req.req
		i, ok := state[audit.EventKey{Source: r.Source, EventID: r.EventID}]
		if _, judged := known[j]; !judged || !ok {
			continue
		}
		f := finished[i]
		decided[j] = true
		done = append(done, j)
		res := audit.OutcomeResult{Changed: true, Status: f.Status,
			NeedsReview: f.Status == audit.StatusProcessing && f.ReviewReason != "",
			Message:     reporterMessage(r, []string{r.ExecutionID}, "")}
		j.res = res
		w.executions = append(w.executions, seenRow{ID: r.ExecutionID, WorkflowID: r.WorkflowID})
		w.reporters = append(w.reporters, actedRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID})
		w.history = append(w.history, historyRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID,
			Decision: string(r.Outcome), Status: string(f.Status), Message: res.Message, CRMRef: r.CRMRef})
		// Counted under the workflow the service knows the reporter by,
		// once this report is recorded.
		key := [3]string{r.Source, cmp.Or(r.WorkflowID, known[j].WorkflowID), audit.MetricOutcome + string(r.Outcome)}
		if at, ok := counterAt[key]; ok {
			w.counters[at].N++
			continue
		}
		counterAt[key] = len(w.counters)
		w.counters = append(w.counters, counterRow{Source: key[0], WorkflowID: key[1], Metric: key[2], N: 1})
	}
	if len(done) == 0 {
		return nil, nil
	}
	if err := s.writeOutcomes(ctx, tx, w, now); err != nil {
		return nil, err
	}
	alerted, err := s.outcomesFollowUp(ctx, tx, done, open, now)
	if err != nil {
		return nil, err
	}
	for i, j := range done {
		j.err = nil
		j.after = s.afterOutcome(j.req.req, j.res, nil, alerted[i])
	}
	return decided, nil
}

// finishRow is one report of a round, for EventBatchFinish.
type finishRow struct {
	Source   string `json:"source"`
	EventID  string `json:"event_id"`
	Status   string `json:"status"`
	Reporter string `json:"reporter"`
	CRMRef   string `json:"crm_ref"`
	Thread   string `json:"thread"` // its alerts' thread (audit.EventThread)
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

// outcomesFollowUp posts, for the finished reports of events whose thread
// is open (people were alerted about them), the news in that thread. open
// says which are, as the fenced transition read it; nil: read them here.
func (s *Store) outcomesFollowUp(ctx context.Context, tx *sqlx.Tx, done []*outcomeJob, open map[audit.EventKey]bool,
	now time.Time) ([]bool, error) {
	alerted := make([]bool, len(done))
	if open == nil {
		threads := uniqueColumn(done, func(j *outcomeJob) string { return audit.EventThread(j.req.req.Source, j.req.req.EventID) })
		var keys []string
		if err := s.namedSelect(ctx, tx, &keys, "read threads", s.q.OutboxBatchOpenThreads, threadsArg{columnSet("thread", threads)}); err != nil {
			return nil, err
		}
		open = map[audit.EventKey]bool{}
		for _, j := range done {
			r := j.req.req
			open[audit.EventKey{Source: r.Source, EventID: r.EventID}] = slices.Contains(keys, audit.EventThread(r.Source, r.EventID))
		}
	}
	for i, j := range done {
		r := j.req.req
		if !open[audit.EventKey{Source: r.Source, EventID: r.EventID}] {
			continue
		}
		h := audit.HistoryLine{Source: r.Source, EventID: r.EventID, Kind: audit.KindOutcome, ExecutionID: r.ExecutionID,
			Decision: string(r.Outcome), Status: string(j.res.Status), Message: j.res.Message, CRMRef: r.CRMRef}
		sent, err := s.followUp(ctx, tx, h, now)
		if err != nil {
			return nil, err
		}
		alerted[i] = sent
	}
	return alerted, nil
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
