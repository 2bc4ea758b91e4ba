package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// claimRound decides one round of a batch: claims that need no lineage,
// each key once, each execution its own holder. It returns the claims it
// could not decide (an execution known by more than its id, an entry with
// items, one that moved between two statements), having written nothing
// for them but the time their entry was last seen: the caller decides
// those alone. In order: read the executions, capture the entries, record
// the deliveries, then write the rest in one go. held is what the batch
// holds (lockEntries): the round adds the entries it captures.
func (s *Store) claimRound(ctx context.Context, tx *sqlx.Tx, jobs []*claimJob, execs map[string]knownExecution,
	held lockedEntries, now time.Time) ([]*claimJob, error) {
	if execs == nil {
		var err error
		ids := uniqueColumn(jobs, func(j *claimJob) string { return j.req.req.ExecutionID })
		if execs, err = s.readExecutions(ctx, tx, ids); err != nil {
			return nil, err
		}
	}
	jobs, moved := s.judgeExecutions(jobs, execs, now)
	if len(jobs) == 0 {
		return moved, nil
	}
	var entries map[audit.EventKey]batchEntry
	var err error
	if s.q.EventBatchCapture != "" {
		entries, err = s.captureRouted(ctx, tx, jobs, held, now)
	} else {
		entries, err = s.captureEntries(ctx, tx, jobs, now)
	}
	if err != nil {
		return nil, err
	}
	jobs = slices.DeleteFunc(jobs, func(j *claimJob) bool {
		if _, ok := entries[eventKey(j.req.req)]; !ok {
			moved = append(moved, j)
			return true
		}
		return false
	})
	if len(jobs) == 0 {
		return moved, nil
	}
	results := make([]audit.ClaimResult, len(jobs))
	for i, j := range jobs {
		results[i] = decideClaim(j, entries[eventKey(j.req.req)], now)
	}
	if err := s.presentRound(ctx, tx, jobs, results, entries, now); err != nil {
		return nil, err
	}
	waiting, err := s.writeRound(ctx, tx, jobs, results, now)
	if err != nil {
		return nil, err
	}
	alerted, err := s.claimsFollowUp(ctx, tx, jobs, results, waiting, now)
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		j.res = results[i]
		j.after = s.afterClaim(results[i], alerted[i])
	}
	return moved, nil
}

// readExecutions reads the executions the service keeps under the given
// n8n ids, by n8n id.
func (s *Store) readExecutions(ctx context.Context, tx *sqlx.Tx, ids []string) (map[string]knownExecution, error) {
	var known []knownExecution
	if err := s.namedSelect(ctx, tx, &known, "read executions", s.q.ExecutionBatchRead, executionsArg{columnSet("id", ids)}); err != nil {
		return nil, err
	}
	byID := make(map[string]knownExecution, len(known))
	for _, k := range known {
		byID[k.N8NID] = k
	}
	return byID, nil
}

// judgeExecutions returns the claims the round can decide, given the
// executions the service knows. One it knows goes alone when anything but
// its id decides whether this claim is its (a reused id, n8n's word to ask
// for, another workflow), or when it has lineage to walk. A second claim of
// the round naming one execution id with another workflow is refused, as it
// would be after the first.
func (s *Store) judgeExecutions(jobs []*claimJob, byID map[string]knownExecution, now time.Time) (live, moved []*claimJob) {
	workflowOf := map[string]string{} // the workflow an execution of this round claimed with
	for _, j := range jobs {
		r := j.req.req
		if k, ok := byID[r.ExecutionID]; ok {
			seen := audit.Sighting{Kind: audit.SeenClaim, WorkflowID: r.WorkflowID, StartedAt: j.req.lin.self.startedAt()}
			verdict, _ := audit.Judge(k.domain(), seen, now, s.maxRun)
			if k.ID != r.ExecutionID || verdict != audit.SameExecution || k.RetryOf != "" ||
				s.lookup != nil && !j.req.lin.self.tried && k.stale(now) {
				moved = append(moved, j)
				continue
			}
		}
		if wf, ok := workflowOf[r.ExecutionID]; ok {
			first := audit.KnownExecution{ID: r.ExecutionID, WorkflowID: wf, FirstSeen: now, LastSeen: now}
			if verdict, why := audit.Judge(first, audit.Sighting{Kind: audit.SeenClaim, WorkflowID: r.WorkflowID}, now,
				s.maxRun); verdict != audit.SameExecution {
				j.err = &audit.Error{Code: audit.CodeConflict, Message: why}
				continue
			}
		}
		if _, ok := workflowOf[r.ExecutionID]; !ok || r.WorkflowID != "" {
			workflowOf[r.ExecutionID] = r.WorkflowID
		}
		live = append(live, j)
	}
	return live, moved
}

// batchEntry is an entry as a batch statement returned it.
type batchEntry struct {
	Source  string `db:"source"`
	EventID string `db:"event_id"`
	entryState
	previousDelivery
	Deliveries int `db:"deliveries"`
	// Presented is whether the claiming execution presented the key
	// before; NULL where the statement cannot tell (SQLite).
	Presented sql.NullBool `db:"presented"`
	// The claim and the step that captured the entry (EventBatchCapture).
	ExecutionID string `db:"execution_id"`
	Step        string `db:"step"`
}

// claimRow is a claim in the row set of a round's capture.
type claimRow struct {
	Source      string `json:"source"`
	EventID     string `json:"event_id"`
	ExecutionID string `json:"execution_id"`
	Step        string `json:"step,omitempty"` // EventBatchCapture's: insert, reclaim, hold or touch
}

// captureRouted captures the round's entries in one statement
// (EventBatchCapture, PostgreSQL), each claim sent to the step its entry's
// state calls for, as the batch locked it or as an earlier round left it:
// insert a key the batch does not hold, reclaim a failed entry, touch any
// other (which holds it when its execution does). The statement writes the
// executions of the claims it returns that the round decides. An entry
// that moved since fails its step's fence and is left out, as is one with
// items; so is a key another session made since the batch locked its
// entries, since what a statement reads of a row it had to wait for is
// older than the row.
func (s *Store) captureRouted(ctx context.Context, tx *sqlx.Tx, jobs []*claimJob, held lockedEntries,
	now time.Time) (map[audit.EventKey]batchEntry, error) {
	rows := make([]claimRow, 0, len(jobs))
	var claimed []*claimJob
	for _, j := range jobs {
		r := j.req.req
		k := eventKey(r)
		row := claimRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID}
		st, ok := held.states[k]
		switch {
		case !ok:
			row.Step = "insert"
		case st.ItemCount > 0:
			continue // items: one by one
		case st.Status == audit.StatusFailed:
			row.Step = "reclaim"
		default:
			row.Step = "touch"
		}
		rows = append(rows, row)
		claimed = append(claimed, j)
	}
	got := make(map[audit.EventKey]batchEntry, len(rows))
	if len(rows) == 0 {
		return got, nil
	}
	var returned []batchEntry
	if err := s.namedSelect(ctx, tx, &returned, "claim entries", s.q.EventBatchCapture, struct {
		Claims     string `db:"claims"`
		Executions string `db:"executions"`
		Now        any    `db:"now"`
	}{rowSet(rows), rowSet(roundExecutions(claimed)), s.t(now)}); err != nil {
		return nil, err
	}
	for _, e := range returned {
		k := audit.EventKey{Source: e.Source, EventID: e.EventID}
		held.states[k] = e.entryState
		switch e.Step {
		case "insert":
			e.decision = audit.DecisionClaimed
		case "reclaim":
			e.decision = audit.DecisionReclaimed
		default:
			if e.decision = touched(e.entryState, e.ExecutionID); e.decision == "" {
				continue
			}
		}
		got[k] = e
	}
	return got, nil
}

// captureEntries captures the round's entries step by step (SQLite): the
// first statement that returns an entry's row decides. The entries it
// returns are the ones the round decides; an entry with items, one that
// failed since the reclaim, one deleted meanwhile is left out (only its
// last-seen time was touched).
func (s *Store) captureEntries(ctx context.Context, tx *sqlx.Tx, jobs []*claimJob, now time.Time) (map[audit.EventKey]batchEntry, error) {
	q := s.q
	got := make(map[audit.EventKey]batchEntry, len(jobs))
	pending := slices.Clone(jobs)
	claimant := make(map[audit.EventKey]string, len(jobs)) // one claim an event in a round
	for _, j := range jobs {
		claimant[eventKey(j.req.req)] = j.req.req.ExecutionID
	}
	for _, step := range []struct {
		query    string
		decision audit.Decision
	}{
		{q.EventBatchInsert, audit.DecisionClaimed},
		{q.EventBatchReclaim, audit.DecisionReclaimed},
		{q.EventBatchTouch, ""}, // none of those: what is it?
	} {
		if len(pending) == 0 {
			break
		}
		rows := make([]claimRow, 0, len(pending))
		for _, j := range pending {
			r := j.req.req
			rows = append(rows, claimRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID})
		}
		var returned []batchEntry
		if err := s.namedSelect(ctx, tx, &returned, "claim entries", step.query, struct {
			Claims string `db:"claims"`
			Now    any    `db:"now"`
		}{rowSet(rows), s.t(now)}); err != nil {
			return nil, err
		}
		for _, e := range returned {
			k := audit.EventKey{Source: e.Source, EventID: e.EventID}
			if e.decision = step.decision; e.decision == "" {
				if e.decision = touched(e.entryState, claimant[k]); e.decision == "" {
					continue
				}
			}
			got[k] = e
		}
		pending = slices.DeleteFunc(pending, func(j *claimJob) bool {
			_, ok := got[eventKey(j.req.req)]
			return ok
		})
	}
	return got, nil
}

// touched is the decision for a claim whose entry the batch neither
// inserted nor reclaimed, given the entry as it is: "" when the claim goes
// one by one (items, or an entry that failed since the batch looked).
func touched(e entryState, execution string) audit.Decision {
	switch {
	case e.ItemCount > 0, e.Status == audit.StatusFailed:
		return ""
	case e.Status == audit.StatusProcessing && e.Holder == execution:
		return audit.DecisionHeld
	case e.Status == audit.StatusDone:
		return audit.DecisionDuplicate
	}
	return audit.DecisionInProgress
}

// decideClaim is what a claim of the round is answered, given its entry
// as captured, before the deliveries are recorded.
func decideClaim(j *claimJob, e batchEntry, now time.Time) audit.ClaimResult {
	r := j.req.req
	d := e.decision
	res := audit.ClaimResult{Decision: d, Status: e.Status, HolderExecutionID: e.Holder, Process: d.Process(),
		IdempotencyKey: audit.IdempotencyKey(r.Source, r.EventID, ""), LineageNote: j.req.lin.noteFor(r.ExecutionID, d),
		Delivery: audit.DeliveryRedelivery}
	if d == audit.DecisionClaimed {
		res.Delivery = audit.DeliveryFirst
	} else {
		res.Class = classify(d, false, e.previousDelivery, r.DeliveryID, r.WorkflowID, r.Fingerprint, now)
	}
	// The count and the fingerprint as the round's write leaves them.
	fingerprint := e.Fingerprint
	if fingerprint == "" {
		fingerprint = r.Fingerprint
	}
	res.Deliveries = e.Deliveries
	res.FingerprintMismatch = r.Fingerprint != "" && fingerprint != r.Fingerprint
	return res
}

// presentRound learns whether each execution of the round presented its
// key before. One that did is the same execution, not a new delivery: its
// answer says so, and it is not counted again. PostgreSQL read it with the
// entries, and records the deliveries with the rest of the round's write;
// SQLite, whose RETURNING cannot tell, records them here and learns it from
// what the insert returns.
func (s *Store) presentRound(ctx context.Context, tx *sqlx.Tx, jobs []*claimJob, results []audit.ClaimResult,
	entries map[audit.EventKey]batchEntry, now time.Time) error {
	isNew := make(map[audit.EventKey]bool, len(jobs))
	if s.q.EventExecutionBatchPresent == "" {
		for _, j := range jobs {
			k := eventKey(j.req.req)
			isNew[k] = !entries[k].Presented.Bool
		}
	} else {
		var fresh []audit.EventKey
		if err := s.namedSelect(ctx, tx, &fresh, "record deliveries", s.q.EventExecutionBatchPresent, struct {
			Presented string `db:"presented"`
			Now       any    `db:"now"`
		}{rowSet(presentRows(jobs, results)), s.t(now)}); err != nil {
			return err
		}
		for _, f := range fresh {
			isNew[f] = true
		}
	}
	for i, j := range jobs {
		if isNew[eventKey(j.req.req)] {
			results[i].Deliveries++
			continue
		}
		results[i].Delivery, results[i].Class = audit.DeliverySameExecution, ""
	}
	return nil
}

// presentedRow is an execution presenting its key, as the round decided it.
type presentedRow struct {
	Source      string `json:"source"`
	EventID     string `json:"event_id"`
	ExecutionID string `json:"execution_id"`
	Delivery    string `json:"delivery"`
	Acted       bool   `json:"acted"`
	DeliveryID  string `json:"delivery_id"`
	WorkflowID  string `json:"workflow_id"`
	Class       string `json:"class"`
}

// presentRows are the round's claims as executions presenting their keys:
// all of them before presentRound, those presenting it for the first time
// after.
func presentRows(jobs []*claimJob, results []audit.ClaimResult) []presentedRow {
	rows := make([]presentedRow, 0, len(jobs))
	for i, j := range jobs {
		r, res := j.req.req, results[i]
		if res.Delivery == audit.DeliverySameExecution {
			continue
		}
		rows = append(rows, presentedRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID,
			Delivery: string(res.Delivery), Acted: res.Process, DeliveryID: r.DeliveryID, WorkflowID: r.WorkflowID,
			Class: string(res.Class)})
	}
	return rows
}

// The rows a round writes once decided, each set marshalled once as JSON
// and read by name by the statements.
type (
	executionRow struct {
		ID             string `json:"id"`
		WorkflowID     string `json:"workflow_id"`
		WorkflowName   string `json:"workflow_name"`
		Mode           string `json:"mode"`
		ClaimedRetryOf string `json:"claimed_retry_of"`
		Note           string `json:"note"`
	}
	actedRow struct {
		Source      string `json:"source"`
		EventID     string `json:"event_id"`
		ExecutionID string `json:"execution_id"`
	}
	deliveryRow struct {
		Source      string `json:"source"`
		EventID     string `json:"event_id"`
		New         bool   `json:"new"`
		Fingerprint string `json:"fingerprint"`
		WorkflowID  string `json:"workflow_id"`
		DeliveryID  string `json:"delivery_id"`
	}
	// historyRow is a history line of a batch, for claims, outcomes and
	// errors alike: each statement reads the fields its lines have.
	historyRow struct {
		Source       string `json:"source"`
		EventID      string `json:"event_id"`
		ExecutionID  string `json:"execution_id"`
		WorkflowID   string `json:"workflow_id"`
		WorkflowName string `json:"workflow_name"`
		Node         string `json:"node"`
		Decision     string `json:"decision"`
		Delivery     string `json:"delivery"`
		Class        string `json:"class"`
		Status       string `json:"status"`
		Message      string `json:"message"`
		CRMRef       string `json:"crm_ref"`
		DedupeKey    string `json:"dedupe_key"` // an error's, until its id is known
		ErrorID      int64  `json:"error_id"`
	}
	counterRow struct {
		Source     string `json:"source"`
		WorkflowID string `json:"workflow_id"`
		Metric     string `json:"metric"`
		N          int    `json:"n"`
	}
)

// roundWrites are the named parameters of the round's write.
type roundWrites struct {
	Executions string `db:"executions"`
	Presented  string `db:"presented"`
	Acted      string `db:"acted"`
	Deliveries string `db:"deliveries"`
	History    string `db:"history"`
	Counters   string `db:"counters"`
	Now        any    `db:"now"`
	Hour       any    `db:"hour"`
	Shard      int    `db:"shard"`
}

// writeRound writes what the decided round leaves: the deliveries (on
// PostgreSQL; SQLite recorded them in presentRound) and those acted on, the
// entries' counts, the history and the counters, and on SQLite the
// executions (PostgreSQL wrote them with the capture). PostgreSQL writes
// them in one statement, SQLite one table at a time. Then it reads the
// errors waiting for the round's executions: on PostgreSQL in the same
// statement, which began after the capture wrote their rows.
func (s *Store) writeRound(ctx context.Context, tx *sqlx.Tx, jobs []*claimJob, results []audit.ClaimResult,
	now time.Time) ([]waitingError, error) {
	var (
		acted      []actedRow
		deliveries []deliveryRow
		history    []historyRow
		counters   []counterRow
	)
	counterAt := map[[3]string]int{}
	for i, j := range jobs {
		r, res := j.req.req, results[i]
		isNew := res.Delivery != audit.DeliverySameExecution
		if !isNew && res.Process {
			acted = append(acted, actedRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID})
		}
		deliveries = append(deliveries, deliveryRow{Source: r.Source, EventID: r.EventID, New: isNew,
			Fingerprint: r.Fingerprint, WorkflowID: r.WorkflowID, DeliveryID: r.DeliveryID})
		history = append(history, historyRow{Source: r.Source, EventID: r.EventID, ExecutionID: r.ExecutionID,
			WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node, Decision: string(res.Decision),
			Delivery: string(res.Delivery), Class: string(res.Class), Status: string(res.Status),
			Message: claimMessage(res, []string{r.ExecutionID}, res.LineageNote)})
		for _, m := range claimMetrics(res) {
			k := [3]string{r.Source, r.WorkflowID, m}
			if at, ok := counterAt[k]; ok {
				counters[at].N++
				continue
			}
			counterAt[k] = len(counters)
			counters = append(counters, counterRow{Source: r.Source, WorkflowID: r.WorkflowID, Metric: m, N: 1})
		}
	}
	sortCounters(counters) // in key order, so that two rounds lock them in the same order
	w := roundWrites{Executions: rowSet(roundExecutions(jobs)), Presented: rowSet(presentRows(jobs, results)), Acted: rowSet(acted), Deliveries: rowSet(deliveries),
		History: rowSet(history), Counters: rowSet(counters), Now: s.t(now),
		Hour: s.t(now.UTC().Truncate(time.Hour)), Shard: s.shard(tx)}
	var waiting []waitingError
	if s.q.ClaimBatchWrite != "" {
		err := s.namedSelect(ctx, tx, &waiting, "write claims", s.q.ClaimBatchWrite, w)
		return waiting, err
	}
	if err := s.writeAll(ctx, tx, w,
		writeStep{"record executions", s.q.ExecutionBatchUpsert},
		writeStep{"record deliveries", s.q.EventExecutionBatchMarkActed},
		writeStep{"count deliveries", s.q.EventBatchCountDeliveries},
		writeStep{"write history", s.q.HistoryBatchInsertClaims},
		writeStep{"count", s.q.StatsBatchAdd}); err != nil {
		return nil, err
	}
	err := s.namedSelect(ctx, tx, &waiting, "find pending errors", s.q.ErrorBatchPending,
		executionsArg{columnSet("id", uniqueColumn(jobs, func(j *claimJob) string { return j.req.req.ExecutionID }))})
	return waiting, err
}

// waitingError is an error recorded before its execution claimed, linked
// to no event: the claim links it.
type waitingError struct {
	ID   string `db:"execution_id"`
	Root string `db:"root_execution_id"`
}

// roundExecutions are the executions a round's claims name, one row each
// (one execution claiming several events fills in what a claim lacks), in
// id order, so that two rounds lock them in the same order.
func roundExecutions(jobs []*claimJob) []executionRow {
	var rows []executionRow
	at := map[string]int{}
	for _, j := range jobs {
		r, lin := j.req.req, j.req.lin
		row := executionRow{ID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Mode: lin.mode,
			ClaimedRetryOf: r.RetryOf, Note: lin.note}
		i, ok := at[r.ExecutionID]
		if !ok {
			at[r.ExecutionID] = len(rows)
			rows = append(rows, row)
			continue
		}
		e := &rows[i]
		e.WorkflowID, e.WorkflowName = cmp.Or(e.WorkflowID, row.WorkflowID), cmp.Or(e.WorkflowName, row.WorkflowName)
		e.Mode, e.ClaimedRetryOf, e.Note = cmp.Or(e.Mode, row.Mode), cmp.Or(e.ClaimedRetryOf, row.ClaimedRetryOf), cmp.Or(e.Note, row.Note)
	}
	slices.SortFunc(rows, func(a, b executionRow) int { return cmp.Compare(a.ID, b.ID) })
	return rows
}

// writeStep is one statement of a batch's write. PostgreSQL writes every
// table in the first one; SQLite has that one empty and writes a table in
// each of the others, which PostgreSQL has empty.
type writeStep struct{ op, query string }

// writeAll runs the steps of a write that this database has, each with the
// same named parameters.
func (s *Store) writeAll(ctx context.Context, tx *sqlx.Tx, arg any, steps ...writeStep) error {
	for _, st := range steps {
		if st.query == "" {
			continue // written by another step on this database
		}
		if _, err := s.namedExec(ctx, tx, st.op, st.query, arg); err != nil {
			return err
		}
	}
	return nil
}

// sortCounters puts counter rows in key order, so that two batches that
// drew one shard lock its rows in the same order.
func sortCounters(rows []counterRow) {
	slices.SortFunc(rows, func(a, b counterRow) int {
		return slices.Compare([]string{a.Source, a.WorkflowID, a.Metric}, []string{b.Source, b.WorkflowID, b.Metric})
	})
}

// eventKey names the event a claim is about.
func eventKey(r audit.ClaimRequest) audit.EventKey {
	return audit.EventKey{Source: r.Source, EventID: r.EventID}
}

// rowSet marshals a batch's rows as one JSON array: an empty set is [].
func rowSet[T any](rows []T) string {
	if len(rows) == 0 {
		return "[]"
	}
	raw, _ := json.Marshal(rows) // strings, booleans and numbers only: it cannot fail
	return string(raw)
}
