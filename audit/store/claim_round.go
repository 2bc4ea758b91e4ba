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

// claimRound decides one round of a batch: claims of distinct events, in
// the order they came. In order: judge the executions (the round records
// them with the capture; one whose lineage or identity needs more, it
// returns deferred, unless the round is one such claim alone, in its
// savepoint (claimAlone), which records it first), refuse a claim whose
// entry has items it did not name (or none where it named some), capture
// the entries, decide, record the deliveries, then write the rest in one
// go. held is what the batch holds (lockEntries): the round adds the
// entries it captures. The claims it defers or sends again (j.again) wrote
// nothing.
func (s *Store) claimRound(ctx context.Context, tx *sqlx.Tx, jobs []*claimJob, execs map[string]knownExecution,
	held lockedEntries, now time.Time, alone bool) (deferred []*claimJob, err error) {
	if execs == nil {
		ids := uniqueColumn(jobs, func(j *claimJob) string { return j.req.req.ExecutionID })
		if execs, err = s.readExecutions(ctx, tx, ids); err != nil {
			return nil, err
		}
	}
	claims := s.judgeExecutions(jobs, execs, now)
	live := claims[:0:0]
	for _, c := range claims {
		if c.recorded && !alone {
			deferred = append(deferred, c.claimJob)
			continue
		}
		if st, exists := held.states[c.key()]; exists && (st.ItemCount > 0) != (len(c.req.req.Items) > 0) {
			c.err = withItems(c.req.req)
			if st.ItemCount == 0 {
				c.err = withoutItems(c.req.req)
			}
			continue
		}
		if c.recorded {
			if ok, err := s.recordLineage(ctx, tx, c, now); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
		}
		live = append(live, c)
	}
	events := slices.DeleteFunc(slices.Clone(live), func(c *roundClaim) bool { return len(c.req.req.Items) > 0 })
	if err := s.captureEvents(ctx, tx, events, held, now); err != nil {
		return nil, err
	}
	for _, c := range live {
		if len(c.req.req.Items) == 0 {
			continue
		}
		if err := s.captureItems(ctx, tx, c, now); err != nil {
			return nil, err
		}
		if c.err == nil {
			held.states[c.key()] = entryState{Status: c.entry.Status, Holder: c.entry.Holder,
				ItemCount: max(1, c.entry.ItemCount)}
		}
	}
	live = slices.DeleteFunc(live, func(c *roundClaim) bool { return c.err != nil })
	if len(live) == 0 {
		return deferred, nil
	}
	results := make([]audit.ClaimResult, len(live))
	for i, c := range live {
		results[i] = decideClaim(c, now)
	}
	if err := s.presentRound(ctx, tx, live, results, now); err != nil {
		return nil, err
	}
	waiting, err := s.writeRound(ctx, tx, live, results, now)
	if err != nil {
		return nil, err
	}
	alerted, err := s.claimsFollowUp(ctx, tx, live, results, waiting, now)
	if err != nil {
		return nil, err
	}
	for i, c := range live {
		c.res = results[i]
		c.after = s.afterClaim(results[i], alerted[i])
	}
	return deferred, nil
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

// judgeExecutions makes the round's claims, given the executions the
// service knows: each its own execution, or, when its lineage or identity
// needs more than its id (needsRecord), marked to be recorded alone. A
// second claim of the round naming one execution id with another workflow
// is refused, as it would be after the first.
func (s *Store) judgeExecutions(jobs []*claimJob, byID map[string]knownExecution, now time.Time) []*roundClaim {
	workflowOf := map[string]string{} // the workflow an execution of this round claimed with
	claims := make([]*roundClaim, 0, len(jobs))
	for _, j := range jobs {
		r := j.req.req
		c := &roundClaim{claimJob: j, id: r.ExecutionID, chain: []string{r.ExecutionID}}
		var known *knownExecution
		if k, ok := byID[r.ExecutionID]; ok {
			known = &k
		}
		if s.needsRecord(c, known, now) {
			c.recorded = true // by recordLineage
			claims = append(claims, c)
			continue
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
		claims = append(claims, c)
	}
	return claims
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
	Source      string   `json:"source"`
	EventID     string   `json:"event_id"`
	ExecutionID string   `json:"execution_id"`
	Chain       []string `json:"chain"`
	Step        string   `json:"step"`
}

// captureEvents captures the entries of the round's claims without items,
// each claim sent to the step its entry's state calls for (stepFor), as
// the batch locked it or as an earlier round left it: on PostgreSQL in one
// statement (EventBatchCapture), which also writes the executions of the
// claims it decides; on SQLite a statement a step. An entry that moved
// since (a key another session made since the batch locked its entries,
// on PostgreSQL) fails its step's fence and is tried again with the step
// it calls for, in a statement of its own: what a statement reads of a row
// it had to wait for is older than the row. A claim whose entry has items
// is refused.
func (s *Store) captureEvents(ctx context.Context, tx *sqlx.Tx, claims []*roundClaim, held lockedEntries,
	now time.Time) error {
	step := make(map[*roundClaim]string, len(claims))
	for _, c := range claims {
		st, exists := held.states[c.key()]
		step[c] = stepFor(st, exists, c.chain)
	}
	pending := claims
	for attempt := 0; attempt < captureAttempts && len(pending) > 0; attempt++ {
		returned, err := s.captureStep(ctx, tx, pending, step, now)
		if err != nil {
			return err
		}
		next := pending[:0:0]
		for _, c := range pending {
			k := c.key()
			e, ok := returned[k]
			if !ok {
				step[c] = afterMiss(step[c])
				next = append(next, c)
				continue
			}
			held.states[k] = e.entryState
			c.entry = e
			if e.ItemCount > 0 {
				c.err = withItems(c.req.req)
				continue
			}
			if c.entry.decision = decided(step[c], e.entryState, c.chain); c.entry.decision == "" {
				step[c] = stepFor(e.entryState, true, c.chain)
				next = append(next, c)
			}
		}
		pending = next
	}
	for _, c := range pending {
		c.entry.decision = audit.DecisionInProgress // it will not settle: the safe answer
	}
	return nil
}

// captureStep runs one step of the capture for the pending claims, each
// routed to its step, and returns the entries that came back.
func (s *Store) captureStep(ctx context.Context, tx *sqlx.Tx, pending []*roundClaim, step map[*roundClaim]string,
	now time.Time) (map[audit.EventKey]batchEntry, error) {
	rows := make([]claimRow, 0, len(pending))
	var fresh []*roundClaim // the claims whose executions the capture records
	for _, c := range pending {
		r := c.req.req
		rows = append(rows, claimRow{Source: r.Source, EventID: r.EventID, ExecutionID: c.id, Chain: c.chain,
			Step: step[c]})
		if !c.recorded {
			fresh = append(fresh, c)
		}
	}
	var returned []batchEntry
	if s.q.EventBatchCapture != "" {
		if err := s.namedSelect(ctx, tx, &returned, "claim entries", s.q.EventBatchCapture, struct {
			Claims     string `db:"claims"`
			Executions string `db:"executions"`
			Now        any    `db:"now"`
		}{rowSet(rows), rowSet(roundExecutions(fresh)), s.t(now)}); err != nil {
			return nil, err
		}
	} else {
		arg := struct {
			Claims string `db:"claims"`
			Now    any    `db:"now"`
		}{rowSet(rows), s.t(now)}
		for _, q := range []struct{ step, query string }{{stepInsert, s.q.EventBatchInsert},
			{stepReclaim, s.q.EventBatchReclaim}, {stepHold, s.q.EventBatchHold}, {stepTouch, s.q.EventBatchTouch}} {
			if !slices.ContainsFunc(rows, func(r claimRow) bool { return r.Step == q.step }) {
				continue
			}
			var got []batchEntry
			if err := s.namedSelect(ctx, tx, &got, "claim entries", q.query, arg); err != nil {
				return nil, err
			}
			for i := range got {
				got[i].Step = q.step
			}
			returned = append(returned, got...)
		}
	}
	byKey := make(map[audit.EventKey]batchEntry, len(returned))
	for _, e := range returned {
		byKey[audit.EventKey{Source: e.Source, EventID: e.EventID}] = e
	}
	return byKey, nil
}

// decideClaim is what a claim of the round is answered, given its entry
// as captured, before the deliveries are recorded.
func decideClaim(c *roundClaim, now time.Time) audit.ClaimResult {
	r, e := c.req.req, c.entry
	d := e.decision
	res := audit.ClaimResult{Decision: d, Status: e.Status, HolderExecutionID: e.Holder, Process: d.Process(),
		IdempotencyKey: audit.IdempotencyKey(r.Source, r.EventID, ""), Items: c.items,
		LineageNote: joinNotes(c.reset, c.req.lin.noteFor(c.id, d)), Delivery: audit.DeliveryRedelivery}
	switch {
	case e.Step == stepInsert:
		res.Delivery = audit.DeliveryFirst
	case len(c.chain) > 1:
		res.Delivery = audit.DeliveryManualRetry
	}
	if e.Step != stepInsert {
		res.Class = classify(d, len(c.chain) > 1, e.previousDelivery, r.DeliveryID, r.WorkflowID, r.Fingerprint, now)
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
func (s *Store) presentRound(ctx context.Context, tx *sqlx.Tx, claims []*roundClaim, results []audit.ClaimResult,
	now time.Time) error {
	isNew := make(map[audit.EventKey]bool, len(claims))
	if s.q.EventExecutionBatchPresent == "" {
		for _, c := range claims {
			isNew[c.key()] = !c.entry.Presented.Bool
		}
	} else {
		var fresh []audit.EventKey
		if err := s.namedSelect(ctx, tx, &fresh, "record deliveries", s.q.EventExecutionBatchPresent, struct {
			Presented string `db:"presented"`
			Now       any    `db:"now"`
		}{rowSet(presentRows(claims, results)), s.t(now)}); err != nil {
			return err
		}
		for _, f := range fresh {
			isNew[f] = true
		}
	}
	for i, c := range claims {
		if isNew[c.key()] {
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
func presentRows(claims []*roundClaim, results []audit.ClaimResult) []presentedRow {
	rows := make([]presentedRow, 0, len(claims))
	for i, c := range claims {
		r, res := c.req.req, results[i]
		if res.Delivery == audit.DeliverySameExecution {
			continue
		}
		rows = append(rows, presentedRow{Source: r.Source, EventID: r.EventID, ExecutionID: c.id,
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
		Item         string `json:"item"`
		ExecutionID  string `json:"execution_id"`
		RetryOf      string `json:"retry_of"`
		WorkflowID   string `json:"workflow_id"`
		WorkflowName string `json:"workflow_name"`
		Node         string `json:"node"`
		Decision     string `json:"decision"`
		Delivery     string `json:"delivery"`
		Class        string `json:"class"`
		Status       string `json:"status"`
		Message      string `json:"message"`
		CRMRef       string `json:"crm_ref"`
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
func (s *Store) writeRound(ctx context.Context, tx *sqlx.Tx, claims []*roundClaim, results []audit.ClaimResult,
	now time.Time) ([]waitingError, error) {
	var (
		acted      []actedRow
		deliveries []deliveryRow
		history    []historyRow
		counters   []counterRow
	)
	counterAt := map[[3]string]int{}
	for i, c := range claims {
		r, res := c.req.req, results[i]
		isNew := res.Delivery != audit.DeliverySameExecution
		if !isNew && res.Process {
			acted = append(acted, actedRow{Source: r.Source, EventID: r.EventID, ExecutionID: c.id})
		}
		deliveries = append(deliveries, deliveryRow{Source: r.Source, EventID: r.EventID, New: isNew,
			Fingerprint: r.Fingerprint, WorkflowID: r.WorkflowID, DeliveryID: r.DeliveryID})
		h := claimHistory(c, res)
		history = append(history, historyRow{Source: h.Source, EventID: h.EventID, ExecutionID: h.ExecutionID,
			RetryOf: h.RetryOf, WorkflowID: h.WorkflowID, WorkflowName: h.WorkflowName, Node: h.Node,
			Decision: h.Decision, Delivery: h.Delivery, Class: h.Class, Status: h.Status, Message: h.Message})
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
	fresh := slices.DeleteFunc(slices.Clone(claims), func(c *roundClaim) bool { return c.recorded })
	w := roundWrites{Executions: rowSet(roundExecutions(fresh)), Presented: rowSet(presentRows(claims, results)),
		Acted: rowSet(acted), Deliveries: rowSet(deliveries), History: rowSet(history), Counters: rowSet(counters), Now: s.t(now),
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
		executionsArg{columnSet("id", uniqueColumn(fresh, func(c *roundClaim) string { return c.id }))})
	return waiting, err
}

// waitingError is an error recorded before its execution claimed, linked
// to no event: the claim links it.
type waitingError struct {
	ID   string `db:"execution_id"`
	Root string `db:"root_execution_id"`
}

// roundExecutions are the executions the round's claims name, one row each
// (one execution claiming several events fills in what a claim lacks), in
// id order, so that two rounds lock them in the same order: the claims
// given are those whose executions the round records (not recorded alone).
func roundExecutions(claims []*roundClaim) []executionRow {
	var rows []executionRow
	at := map[string]int{}
	for _, c := range claims {
		r, lin := c.req.req, c.req.lin
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
