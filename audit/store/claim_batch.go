package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// claimInput is one claim waiting for a batch, with what n8n said of its
// lineage before. A plain claim (no items, no retry_of) is queued without
// it: lineage matters only when another execution holds the event, which
// the batch finds out for all its claims in one statement, and sends the
// few that need their lineage again once it is learned.
type claimInput struct {
	req     audit.ClaimRequest
	lin     lineage
	learned bool
}

// claimInput readies a claim for the queue.
func (s *Store) claimInput(ctx context.Context, req audit.ClaimRequest) claimInput {
	if len(req.Items) == 0 && req.RetryOf == "" {
		return claimInput{req: req}
	}
	return claimInput{req: req, learned: true, lin: s.learnLineage(ctx, lineageKey{Source: req.Source,
		EventID: req.EventID, Items: req.Items, ExecutionID: req.ExecutionID, ClaimedRetryOf: req.RetryOf})}
}

type claimJob = job[claimInput, audit.ClaimResult]

// lineageToRecord reports a claim whose execution is recorded alone
// whatever the service knows of it: its lineage (confirmed, or a client's
// retry_of, which roots it under the execution it names), or its items.
func (c claimInput) lineageToRecord() bool {
	return len(c.req.Items) > 0 || c.lin.retryOf != "" || len(c.lin.hops) > 0 || c.req.RetryOf != ""
}

// prepareClaim learns a claim's lineage anew, for a batch that sent it back.
func (s *Store) prepareClaim(ctx context.Context, c claimInput) claimInput {
	r := c.req
	c.lin = s.learnLineage(ctx, lineageKey{Source: r.Source, EventID: r.EventID, Items: r.Items,
		ExecutionID: r.ExecutionID, ClaimedRetryOf: r.RetryOf})
	c.learned = true
	return c
}

// claimBatch decides a batch of claims in tx, in rounds: the first claim of
// each event, then the second, and so on, each round in set-based
// statements that see what the rounds before did, so that claims of one
// event are decided in the order they came, each after the one before, as
// one by one. A batch of one is a round of one. First the batch locks its
// entries' rows: the claims of an entry whose row another session holds
// are set aside (batcher.setAside), never waited for.
func (s *Store) claimBatch(ctx context.Context, tx *sqlx.Tx, jobs []*claimJob, now time.Time) error {
	// The executions the batch names, read once (with the lock on
	// PostgreSQL): for their lineage, and for the first round, which
	// writes nothing before it judges them.
	ids := uniqueColumn(jobs, func(j *claimJob) string { return j.req.req.ExecutionID })
	locked, err := lockEntries(ctx, s, tx, jobs, func(c claimInput) audit.EventKey {
		return audit.EventKey{Source: c.req.Source, EventID: c.req.EventID}
	}, ids)
	if err != nil {
		return err
	}
	jobs = s.claims.setAside(jobs, func(c claimInput) bool { return locked.held[eventKey(c.req)] })
	execs := locked.execs
	if execs == nil {
		if execs, err = s.readExecutions(ctx, tx, ids); err != nil {
			return err
		}
	}
	if jobs = s.refuseOtherWorkflows(jobs, execs, now); len(jobs) == 0 {
		return nil
	}
	known, held := s.lineageInBatch(jobs, execs, locked.states)
	count := map[audit.EventKey]int{} // the event's claims decided in this batch
	nth := map[*claimJob]int{}        // a claim's place among its event's: its round
	alone, later := map[audit.EventKey]bool{}, map[audit.EventKey]bool{}
	for _, j := range jobs {
		k := eventKey(j.req.req)
		// A claim queued without its lineage that meets another holder,
		// when its lineage can say anything, goes again with it learned.
		if h := held[k]; !later[k] && count[k] == 0 && !j.req.learned && h != "" &&
			h != j.req.req.ExecutionID && (s.lookup != nil || known[j.req.req.ExecutionID]) {
			j.again, later[k] = true, true
			continue
		}
		// An execution's lineage was learned before the batch, against the
		// holder then: a later claim of an event in the same batch may meet
		// another holder, decided here. When its lineage can say anything
		// (n8n's API, a retry_of to check, what n8n told us of it before),
		// it goes again, its lineage learned anew, once this batch has
		// committed.
		if later[k] || count[k] > 0 && !j.req.lin.complete &&
			(s.lookup != nil || j.req.req.RetryOf != "" || known[j.req.req.ExecutionID]) {
			j.again, later[k] = true, true // and every claim of the event after it
			continue
		}
		nth[j] = count[k]
		count[k]++
		if j.req.lineageToRecord() {
			alone[k] = true
		}
	}
	// The rounds, each in the order the claims came. A claim whose
	// execution must be recorded alone (its lineage, its items, a reused
	// id) is deferred with the rest of its event: those are decided after
	// the rounds, a round of one each, in the order they came, since the
	// execution one records may be the one a later claim is judged against.
	for round := 0; ; round++ {
		var batch []*claimJob
		for _, j := range jobs {
			if n, ok := nth[j]; ok && n == round && !alone[eventKey(j.req.req)] {
				batch = append(batch, j)
			}
		}
		if len(batch) == 0 {
			break
		}
		deferred, err := s.claimRound(ctx, tx, batch, execs, locked, now, false)
		execs = nil // the later rounds read what the rounds before wrote
		if err != nil {
			return err
		}
		for _, j := range deferred {
			alone[eventKey(j.req.req)] = true
		}
	}
	asking := map[audit.EventKey]bool{} // events with a claim gone to ask n8n: the claims after it follow
	for _, j := range jobs {
		k := eventKey(j.req.req)
		if undecided := j.err == nil && j.res.Decision == "" && !j.again; !undecided || !alone[k] {
			continue
		}
		if asking[k] {
			j.again = true
			continue
		}
		if err := s.claimAlone(ctx, tx, j, locked, now); err != nil {
			return err
		}
		asking[k] = j.again
	}
	return nil
}

// refuseOtherWorkflows refuses, in the order the claims came, a claim
// naming an execution id that an earlier claim of the batch named with
// another workflow, and returns the rest. One by one, the first registers
// the execution and the second is refused; the batch decides events in
// rounds, the first claim of every event before the second of any, which is
// not the order they came. An execution the service already knows is
// judged against what it knows.
func (s *Store) refuseOtherWorkflows(jobs []*claimJob, execs map[string]knownExecution, now time.Time) []*claimJob {
	workflowOf := map[string]string{}
	var twice []string
	for _, j := range jobs {
		r := j.req.req
		wf, ok := workflowOf[r.ExecutionID]
		switch {
		case !ok || wf == "":
			workflowOf[r.ExecutionID] = r.WorkflowID
		case r.WorkflowID != "" && r.WorkflowID != wf && !slices.Contains(twice, r.ExecutionID):
			twice = append(twice, r.ExecutionID)
		}
	}
	if len(twice) == 0 {
		return jobs
	}
	first := map[string]string{} // the workflow the execution was claimed with first in the batch
	kept := jobs[:0:0]
	for _, j := range jobs {
		r := j.req.req
		if _, known := execs[r.ExecutionID]; !slices.Contains(twice, r.ExecutionID) || known {
			kept = append(kept, j)
			continue
		}
		if wf := first[r.ExecutionID]; wf != "" {
			seen := audit.KnownExecution{ID: r.ExecutionID, WorkflowID: wf, FirstSeen: now, LastSeen: now}
			if verdict, why := audit.Judge(seen, audit.Sighting{Kind: audit.SeenClaim, WorkflowID: r.WorkflowID}, now,
				s.maxRun); verdict != audit.SameExecution {
				j.err = &audit.Error{Code: audit.CodeConflict, Message: why}
				continue
			}
		} else {
			first[r.ExecutionID] = r.WorkflowID
		}
		kept = append(kept, j)
	}
	return kept
}

// lockedEntries is what lockEntries found.
type lockedEntries struct {
	// held are the entries another database session holds:
	// a batch that waited for one would hold its neighbours for the lock
	// timeout, then fail and run again one by one.
	held map[audit.EventKey]bool
	// states are the entries the batch locked (the entries of its keys
	// that exist), as it locked them: its statements change them without
	// waiting, and what it reads of them stays true until it commits. On
	// SQLite, with one writer, every entry is the batch's.
	states map[audit.EventKey]entryState
	// execs are the executions kept under the n8n ids asked for, by n8n
	// id. nil: not read (SQLite).
	execs map[string]knownExecution
}

// lockEntries locks, in tx, the rows of the entries the jobs are about and
// reads them and the executions kept under execIDs, in one statement. On
// SQLite, with one writer and no row locks, it reads the entries: no other
// session holds one.
func lockEntries[Req, Res any](ctx context.Context, s *Store, tx *sqlx.Tx, jobs []*job[Req, Res],
	key func(Req) audit.EventKey, execIDs []string) (lockedEntries, error) {
	seen := map[audit.EventKey]bool{}
	var keys []audit.EventKey
	for _, j := range jobs {
		if k := key(j.req); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	var got struct {
		Entries    []byte `db:"entries"`
		Executions []byte `db:"executions"`
	}
	if _, err := s.namedGet(ctx, tx, &got, "lock entries", s.q.EventBatchLock, struct {
		Keys       string `db:"keys"`
		Executions string `db:"executions"`
	}{rowSet(keys), columnSet("id", execIDs)}); err != nil {
		return lockedEntries{}, err
	}
	var entries []struct {
		audit.EventKey
		entryState
		Held bool `json:"held"`
	}
	var known []knownExecution
	if err := json.Unmarshal(got.Entries, &entries); err != nil {
		return lockedEntries{}, &audit.Error{Code: audit.CodeInternal, Message: "lock entries: read", Err: err}
	}
	l := lockedEntries{held: map[audit.EventKey]bool{}, states: make(map[audit.EventKey]entryState, len(entries))}
	if got.Executions != nil { // NULL: not read
		if err := json.Unmarshal(got.Executions, &known); err != nil {
			return lockedEntries{}, &audit.Error{Code: audit.CodeInternal, Message: "lock entries: read executions", Err: err}
		}
		l.execs = make(map[string]knownExecution, len(known))
	}
	for _, e := range entries {
		if e.Held {
			l.held[e.EventKey] = true
		} else {
			l.states[e.EventKey] = e.entryState
		}
	}
	for _, k := range known {
		l.execs[k.N8NID] = k
	}
	return l, nil
}

// columnSet is a row set of one column: each value as {name: value}.
func columnSet(name string, vals []string) string {
	rows := make([]map[string]string, len(vals))
	for i, v := range vals {
		rows[i] = map[string]string{name: v}
	}
	return rowSet(rows)
}

// lineageInBatch finds, from what the batch read, what decides whether a
// claim's lineage can matter: known are the executions of which the
// service knows what n8n said (a mode or a retryOf), among the later
// claims of an event and the claims queued without lineage; held are the
// executions holding the events of the claims queued without lineage, as
// the batch starts (states). Without n8n's API a claim's lineage can say
// something only when its execution is known, so only those are looked at.
func (s *Store) lineageInBatch(jobs []*claimJob, execs map[string]knownExecution,
	states map[audit.EventKey]entryState) (known map[string]bool, held map[audit.EventKey]string) {
	seen := map[audit.EventKey]bool{}
	var asked, unlearned []*claimJob
	for _, j := range jobs {
		k := eventKey(j.req.req)
		if !j.req.learned && !seen[k] {
			unlearned = append(unlearned, j)
		}
		if seen[k] || !j.req.learned {
			asked = append(asked, j)
		}
		seen[k] = true
	}
	if s.lookup == nil && len(asked) > 0 {
		known = map[string]bool{}
		for _, j := range asked {
			if k, ok := execs[j.req.req.ExecutionID]; ok && (k.RetryOf != "" || k.Mode != "") {
				known[k.N8NID] = true
			}
		}
		unlearned = slices.DeleteFunc(unlearned, func(j *claimJob) bool { return !known[j.req.req.ExecutionID] })
	}
	held = map[audit.EventKey]string{}
	for _, j := range unlearned {
		st := states[eventKey(j.req.req)]
		if st.Status == audit.StatusProcessing && st.Holder != "" && st.ItemCount == 0 {
			held[eventKey(j.req.req)] = st.Holder
		}
	}
	return known, held
}

// claimAlone decides one claim in a round of its own, in a savepoint: a
// claim refused for what it asks (or sent to ask n8n first) writes nothing,
// whichever step refused it, and its neighbours go on.
func (s *Store) claimAlone(ctx context.Context, tx *sqlx.Tx, j *claimJob, locked lockedEntries, now time.Time) error {
	_, err := s.alone(ctx, tx, "claim", func() error {
		if _, err := s.claimRound(ctx, tx, []*claimJob{j}, nil, locked, now, true); err != nil {
			return err
		}
		switch {
		case j.again:
			return errAskN8N
		case j.err != nil && refusal(j.err):
			return j.err
		}
		return nil
	})
	return err
}

// alone runs fn, one request's work inside a batch, in a savepoint of tx.
// What fn wrote stays when it returns nil. When it returns an error that
// answers only its request (a refusal, or errAskN8N: its caller asks n8n
// and sends it again), what it wrote is rolled back and the error comes
// back as the answer; any other error fails the batch.
func (s *Store) alone(ctx context.Context, tx *sqlx.Tx, op string, fn func() error) (answer, err error) {
	if _, err := s.exec(ctx, tx, op, s.q.Savepoint); err != nil {
		return nil, err
	}
	if answer = fn(); answer != nil {
		if !refusal(answer) && !errors.Is(answer, errAskN8N) {
			return nil, answer
		}
		_, err = s.exec(ctx, tx, op, s.q.SavepointRollback)
		return answer, err
	}
	_, err = s.exec(ctx, tx, op, s.q.SavepointRelease)
	return nil, err
}

// refusal reports an error that answers one request (it asked for something
// the ledger refuses) rather than failing the transaction.
func refusal(err error) bool {
	switch audit.ErrorCode(err) {
	case audit.CodeInvalid, audit.CodeNotFound, audit.CodeConflict, audit.CodeNotHolder:
		return true
	}
	return false
}

func (s *Store) afterClaim(res audit.ClaimResult, alerted bool) func() {
	return func() {
		s.metrics.Claimed(string(res.Decision), string(res.Delivery), string(res.Class))
		if alerted {
			s.nudge()
		}
	}
}

// claimsFollowUp does what follows from the round's history lines, for the
// claims that need it (follow): those with a second fingerprint, with
// errors waiting for their executions, that captured an event people were
// alerted about, and every claim whose execution was recorded alone (a
// retry, a reused id: rare, and its errors wait under its chain).
func (s *Store) claimsFollowUp(ctx context.Context, tx *sqlx.Tx, claims []*roundClaim, results []audit.ClaimResult,
	waiting []waitingError, now time.Time) ([]bool, error) {
	alerted := make([]bool, len(claims))
	var threads []string
	for i, c := range claims {
		if res := results[i]; res.Delivery == audit.DeliveryRedelivery && res.Process {
			threads = append(threads, audit.EventThread(c.req.req.Source, c.req.req.EventID))
		}
	}
	pendingFor := map[string]bool{}
	for _, w := range waiting {
		pendingFor[w.ID], pendingFor[w.Root] = true, true
	}
	open := map[string]bool{}
	if len(threads) > 0 {
		var keys []string
		if err := s.namedSelect(ctx, tx, &keys, "read threads", s.q.OutboxBatchOpenThreads, threadsArg{columnSet("thread", threads)}); err != nil {
			return nil, err
		}
		for _, k := range keys {
			open[k] = true
		}
	}
	for i, c := range claims {
		r, res := c.req.req, results[i]
		if !c.recorded && !res.FingerprintMismatch && !pendingFor[c.id] && !open[audit.EventThread(r.Source, r.EventID)] {
			continue
		}
		var err error
		if alerted[i], err = s.follow(ctx, tx, c, res, claimHistory(c, res), now); err != nil {
			return nil, err
		}
	}
	return alerted, nil
}

// uniqueColumn returns the distinct values of one column, in order.
func uniqueColumn[T any](jobs []T, col func(T) string) []string {
	seen := map[string]bool{}
	var vals []string
	for _, j := range jobs {
		if v := col(j); !seen[v] {
			seen[v] = true
			vals = append(vals, v)
		}
	}
	return vals
}

// The named parameters of the batch reads: one row set each.
type (
	executionsArg struct {
		Executions string `db:"executions"`
	}
	threadsArg struct {
		Threads string `db:"threads"`
	}
)

// reportKey names the entry an outcome report is about.
func reportKey(r audit.OutcomeRequest) audit.EventKey {
	return audit.EventKey{Source: r.Source, EventID: r.EventID}
}
