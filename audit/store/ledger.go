package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// The ledger: every request that moves an entry (a claim, an outcome
// report, an error report, a hook call, a person's resolution, the stale
// detector's look) is decided the same way, in three steps inside one
// transaction: lock the entries the batch names and read what its
// decisions need (LedgerLock, one statement), decide each request in the
// order it came with audit.Decider (pure Go: the rules are in audit's
// decision table), and write the plan (LedgerWrite). Claims, outcomes and
// error reports are batched (group commit); the rest are batches of one.

// request is one request of a batch.
type request struct {
	claim   *audit.ClaimRequest
	outcome *audit.OutcomeRequest
	report  *audit.N8NErrorReport
	hooks   []audit.N8NHookReport
	resolve *audit.ResolveRequest
	retry   *audit.RetryRequest
	lookup  *audit.LookupRecord
	stale   *staleCheck
	word    *audit.N8NWord // what n8n's API said of the request's execution
}

// staleCheck is the stale detector's look at an entry.
type staleCheck struct {
	key    audit.EventKey
	holder string
	cutoff time.Time
}

// answer is what a request is answered: its result, or its refusal (err,
// beside which what the request wrote commits).
type answer struct {
	claim   audit.ClaimResult
	outcome audit.OutcomeResult
	report  audit.N8NErrorResult
	hooks   []audit.N8NHookResult
	status  audit.Status
	stale   bool
	refusal error
}

type ledgerJob = job[*request, answer]

// key names the event a request is about (none for an error report or a
// hook call, which find their events through their executions).
func (r *request) key() audit.EventKey {
	switch {
	case r.claim != nil:
		return audit.EventKey{Source: r.claim.Source, EventID: r.claim.EventID}
	case r.outcome != nil:
		return audit.EventKey{Source: r.outcome.Source, EventID: r.outcome.EventID}
	case r.resolve != nil:
		return audit.EventKey{Source: r.resolve.Source, EventID: r.resolve.EventID}
	case r.retry != nil:
		return audit.EventKey{Source: r.retry.Source, EventID: r.retry.EventID}
	case r.lookup != nil:
		return audit.EventKey{Source: r.lookup.Source, EventID: r.lookup.EventID}
	case r.stale != nil:
		return r.stale.key
	}
	return audit.EventKey{}
}

// want gathers what the lock must read for a batch.
func wantOf(jobs []*ledgerJob) *want {
	w := &want{}
	for _, j := range jobs {
		r := j.req
		switch {
		case r.claim != nil:
			c := r.claim
			w.event(c.Source, c.EventID)
			w.id(c.ExecutionID)
			w.id(c.RetryOf)
			w.stamp(c.RunStamp, c.ExecutionID)
			w.pending = true
		case r.outcome != nil:
			o := r.outcome
			w.event(o.Source, o.EventID)
			w.id(o.ExecutionID)
			w.stamp(o.RunStamp, o.ExecutionID)
			w.evidence = true
		case r.report != nil:
			w.id(r.report.ExecutionID)
			w.id(r.report.RetryOf)
			w.dedupe = append(w.dedupe, r.report.DedupeKey)
			w.touch = true
		case r.hooks != nil:
			for _, h := range r.hooks {
				w.id(h.ExecutionID)
				w.id(h.RetryOf)
				w.dedupe = append(w.dedupe, "exec:"+h.ExecutionID)
			}
			w.touch = true
		case r.resolve != nil:
			w.event(r.resolve.Source, r.resolve.EventID)
		case r.retry != nil:
			w.event(r.retry.Source, r.retry.EventID)
		case r.lookup != nil:
			w.event(r.lookup.Source, r.lookup.EventID)
		case r.stale != nil:
			w.event(r.stale.key.Source, r.stale.key.EventID)
			w.id(r.stale.holder)
		}
		w.word(r.word)
	}
	if w.touch {
		// A new execution reusing an id records its error under a key of
		// its own; the lock reads what it would be.
		for _, id := range w.ids {
			w.dedupe = append(w.dedupe, "exec:"+id)
		}
	}
	return w
}

// decide runs a batch: lock, decide each request in the order it came,
// write. The requests of entries another session holds are set aside
// (setAside): they go in a later batch, never waiting for the row.
func (s *Store) decide(ctx context.Context, tx *sqlx.Tx, jobs []*ledgerJob, now time.Time,
	setAside func([]*ledgerJob, func(*request) bool) []*ledgerJob) error {
	snap, err := s.lock(ctx, tx, wantOf(jobs))
	if err != nil {
		return err
	}
	if len(snap.Locked) > 0 {
		// A report or a hook call finds its events through its
		// executions: any row held elsewhere may be one of them.
		jobs = setAside(jobs, func(r *request) bool {
			return snap.Locked[r.key()] || r.report != nil || r.hooks != nil
		})
	}
	d := audit.NewDecider(snap, now, audit.Rules{MaxRun: s.maxRun, ReviewAfter: s.reviewAfter})
	for _, j := range jobs {
		r, a := j.req, &j.res
		switch {
		case r.claim != nil:
			a.claim, j.err = d.Claim(*r.claim, r.word)
		case r.outcome != nil:
			a.outcome, a.refusal = d.Outcome(*r.outcome, r.word)
		case r.report != nil:
			a.report = d.Error(*r.report, r.word)
		case r.hooks != nil:
			for _, h := range r.hooks {
				a.hooks = append(a.hooks, d.Hook(h))
			}
		case r.resolve != nil:
			a.status, j.err = d.Resolve(*r.resolve)
		case r.retry != nil:
			j.err = d.Retry(*r.retry)
		case r.lookup != nil:
			j.err = d.Lookup(r.lookup)
		case r.stale != nil:
			a.stale = d.Stale(r.stale.key, r.stale.holder, r.stale.cutoff)
		}
	}
	plan := d.Plan()
	ids, err := s.write(ctx, tx, plan, now)
	if err != nil {
		return err
	}
	wakes := plan.Wakes()
	for _, j := range jobs {
		a := &j.res
		if a.report.DedupeKey != "" && a.report.ID == 0 {
			a.report.ID = ids[a.report.DedupeKey]
		}
		for i := range a.hooks {
			if a.hooks[i].ErrorKey != "" && a.hooks[i].ErrorID == 0 {
				a.hooks[i].ErrorID = ids[a.hooks[i].ErrorKey]
			}
		}
		j.after = s.afterLedger(j.req, *a, wakes)
	}
	return nil
}

// afterLedger counts what a request did and wakes the outbox worker when
// its batch wrote an alert, once the batch committed.
func (s *Store) afterLedger(r *request, a answer, wakes bool) func() {
	return func() {
		switch {
		case r.claim != nil:
			s.metrics.Claimed(string(a.claim.Decision), string(a.claim.Delivery), string(a.claim.Class))
		case r.outcome != nil:
			s.metrics.Reported(string(r.outcome.Outcome), a.outcome.Changed && a.refusal == nil)
		case r.report != nil && !a.report.Duplicate:
			s.metrics.Ingested(a.report.Kind)
		}
		if wakes {
			s.nudge()
		}
	}
}

// alone decides one request in a transaction of its own: a person's
// resolution, a hook call, a stale check. When another session holds one
// of its rows, it tries again a little later, until the lock timeout: a
// person's resolution then sees what the other one did.
func (s *Store) alone(ctx context.Context, r *request) (answer, error) {
	j := &ledgerJob{ctx: ctx, req: r}
	var err error
	for start, pause := time.Now(), time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		held := false
		err = s.inTx(ctx, func(tx *sqlx.Tx) error {
			j.res, j.err, j.after, held = answer{}, nil, nil, false
			return s.decide(ctx, tx, []*ledgerJob{j}, s.now(), func(jobs []*ledgerJob, _ func(*request) bool) []*ledgerJob {
				held = true
				return nil
			})
		})
		if err != nil || !held {
			break
		}
		if time.Since(start) > s.lockTimeout {
			j.err = &audit.Error{Code: audit.CodeBusy, Message: "an entry's row is held by another database session",
				Err: audit.ErrLocked}
			break
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return answer{}, s.dbError("wait for a row another session holds", ctx.Err())
		}
	}
	if err != nil {
		return answer{}, err
	}
	if j.err == nil && j.after != nil {
		j.after()
	}
	return j.res, j.err
}

// errDecideAgain says a batch's write met a row another session wrote
// since the batch read: the transaction is run again, deciding anew.
var errDecideAgain = errors.New("store: another session wrote a row this batch decided about: decide again")

// Claim registers an execution's wish to act on an event and decides, in
// one transaction, whether it may (audit.Decider.Claim); concurrent claims
// share one.
func (s *Store) Claim(ctx context.Context, req audit.ClaimRequest) (audit.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return audit.ClaimResult{}, err
	}
	req = req.Stored(s.redact)
	a, err := s.claims.do(ctx, &request{claim: &req, word: s.askFor(ctx, req.ExecutionID, req.RunStamp, req.Mode, req.RetryOf)})
	return a.claim, err
}

// ReportOutcome moves an entry for its holder (audit.Decider.Outcome). A
// report from an execution that does not hold it is refused with
// CodeNotHolder and kept as evidence.
func (s *Store) ReportOutcome(ctx context.Context, req audit.OutcomeRequest) (audit.OutcomeResult, error) {
	if err := req.Validate(); err != nil {
		return audit.OutcomeResult{}, err
	}
	a, err := s.outcomes.do(ctx, &request{outcome: &req, word: s.askFor(ctx, req.ExecutionID, req.RunStamp, req.Mode, "")})
	if err != nil {
		return audit.OutcomeResult{}, err
	}
	return a.outcome, a.refusal
}

// RecordError stores an error report once per execution (or identical
// payload), links it to the events its execution touched and alerts
// (audit.Decider.Error).
func (s *Store) RecordError(ctx context.Context, r audit.N8NErrorReport) (audit.N8NErrorResult, error) {
	r = r.Stored(s.redact)
	var word *audit.N8NWord
	if r.Kind == audit.N8NErrorExecution && r.ExecutionID != "" {
		word = s.askN8N(ctx, r.ExecutionID)
	}
	a, err := s.errors.do(ctx, &request{report: &r, word: word})
	return a.report, err
}

// RecordHookReports records what n8n's execution hooks say about
// executions' starts and ends, in one transaction (audit.Decider.Hook).
func (s *Store) RecordHookReports(ctx context.Context, reports []audit.N8NHookReport) ([]audit.N8NHookResult, error) {
	if err := audit.ValidateHookReports(reports); err != nil {
		return nil, err
	}
	stored := make([]audit.N8NHookReport, len(reports))
	for i, r := range reports {
		stored[i] = r.Stored(s.redact)
	}
	a, err := s.alone(ctx, &request{hooks: stored})
	return a.hooks, err
}

// Resolve moves an entry for a person (audit.Decider.Resolve): fenced by
// the version and the holder the person saw, so that of two people one
// wins and the other is told what changed.
func (s *Store) Resolve(ctx context.Context, req audit.ResolveRequest) (audit.Status, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	a, err := s.alone(ctx, &request{resolve: &req})
	return a.status, err
}

// Retry writes a person's request that n8n retry an entry's failed
// execution (audit.Decider.Retry), fenced by the version the person saw.
func (s *Store) Retry(ctx context.Context, req audit.RetryRequest) error {
	if err := req.Validate(); err != nil {
		return err
	}
	_, err := s.alone(ctx, &request{retry: &req})
	return err
}

// RecordLookup writes a person's CRM lookup in the event's history
// (audit.Decider.Lookup), redacted; the entry and its version stay. It
// returns the record as written (an error when the entry moved since
// r.Version).
func (s *Store) RecordLookup(ctx context.Context, r audit.LookupRecord) (audit.LookupRecord, error) {
	if err := r.Validate(); err != nil {
		return r, err
	}
	r = r.Stored(s.redact)
	_, err := s.alone(ctx, &request{lookup: &r})
	return r, err
}

// Time is a time as this database compares it, for statements written
// outside the store on its handle (DB).
func (s *Store) Time(t time.Time) any { return s.t(t) }

// DetectStale alerts, once per processing period, about entries processing
// for longer than the review delay without an outcome. Each is decided in a
// transaction of its own, safe for several instances at once.
func (s *Store) DetectStale(ctx context.Context) (int, error) {
	cutoff := s.reviewCutoff()
	var keys []eventRow
	if err := s.namedSelect(ctx, s.db, &keys, "find stale entries", s.q.EventFindStale, map[string]any{"cutoff": s.t(cutoff)}); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		key := audit.EventKey{Source: k.Source, EventID: k.EventID}
		a, err := s.alone(ctx, &request{stale: &staleCheck{key: key, holder: k.Holder, cutoff: cutoff}})
		if err != nil {
			return n, err
		}
		if a.stale {
			n++
		}
	}
	return n, nil
}

// lockArgs are what a batch asks the lock to read: the events its requests
// name, the n8n ids and run stamps of their executions, the dedupe keys of
// their errors; touch also locks the events the executions (and what they
// retry) touched (error reports), pending also reads the errors waiting for
// the executions' claims, evidence the reports kept as evidence.
type lockArgs struct {
	Keys     string `db:"keys"`
	IDs      string `db:"ids"`
	Stamps   string `db:"stamps"`
	Dedupe   string `db:"dedupe"`
	Touch    bool   `db:"touch"`
	Pending  bool   `db:"pending"`
	Evidence bool   `db:"evidence"`
}

// lockRows is what LedgerLock returns: one JSON array a table.
type lockRows struct {
	Events     []byte `db:"events"`
	Held       []byte `db:"held"`
	Items      []byte `db:"items"`
	Executions []byte `db:"executions"`
	Presences  []byte `db:"presences"`
	Evidence   []byte `db:"evidence"`
	Pending    []byte `db:"pending"`
	Errors     []byte `db:"errors"`
}

// want is what a batch's requests name, gathered for the lock.
type want struct {
	keys                []audit.EventKey
	ids, stamps, dedupe []string
	touch, pending      bool
	evidence            bool
}

func (w *want) event(source, eventID string) {
	k := audit.EventKey{Source: source, EventID: eventID}
	if !slices.Contains(w.keys, k) {
		w.keys = append(w.keys, k)
	}
}

func (w *want) id(id string) {
	if id != "" && !slices.Contains(w.ids, id) {
		w.ids = append(w.ids, id)
	}
}

func (w *want) stamp(stamp, like string) {
	if stamp == "" {
		return
	}
	if !slices.Contains(w.stamps, stamp) {
		w.stamps = append(w.stamps, stamp)
	}
	w.id(audit.StampMaker(stamp, like))
}

func (w *want) word(word *audit.N8NWord) {
	if word == nil || !word.Asked || word.Err != nil {
		return
	}
	w.id(word.Self.RetryOf)
	for _, a := range word.Ancestors {
		w.id(a.ID)
		w.id(a.RetryOf)
	}
}

// lock locks the entries a batch names (rows another session holds are
// reported, not waited for) and reads everything its decisions read, in
// one statement.
func (s *Store) lock(ctx context.Context, tx *sqlx.Tx, w *want) (*audit.Snapshot, error) {
	slices.SortFunc(w.keys, func(a, b audit.EventKey) int {
		return slices.Compare([]string{a.Source, a.EventID}, []string{b.Source, b.EventID})
	})
	var rows lockRows
	if err := s.one(ctx, tx, &rows, "lock entries", s.q.LedgerLock, lockArgs{Keys: rowSet(w.keys), IDs: rowSet(w.ids),
		Stamps: rowSet(w.stamps), Dedupe: rowSet(w.dedupe), Touch: w.touch, Pending: w.pending,
		Evidence: w.evidence}); err != nil {
		return nil, err
	}
	snap := audit.NewSnapshot()
	var (
		events    []eventRow
		held      []audit.EventKey
		items     []itemRow
		execs     []executionRow
		presences []presenceRow
		evidence  []historyRow
		pending   []errorRow
		known     []errorRow
	)
	for _, c := range []struct {
		raw  []byte
		into any
	}{{rows.Events, &events}, {rows.Held, &held}, {rows.Items, &items}, {rows.Executions, &execs},
		{rows.Presences, &presences}, {rows.Evidence, &evidence}, {rows.Pending, &pending}, {rows.Errors, &known}} {
		if len(c.raw) == 0 {
			continue // NULL: none
		}
		if err := json.Unmarshal(c.raw, c.into); err != nil {
			return nil, &audit.Error{Code: audit.CodeInternal, Message: "lock entries: read", Err: err}
		}
	}
	for _, r := range events {
		e := r.entry()
		snap.Entries[e.EntryKey] = e
	}
	for _, k := range held {
		snap.Locked[k] = true
	}
	for _, r := range items {
		e := r.entry()
		snap.Entries[e.EntryKey] = e
	}
	for _, r := range execs {
		x := r.exec()
		snap.Execs[x.ID] = x
	}
	for _, r := range presences {
		snap.AddPresence(r.presence())
	}
	for _, r := range evidence {
		snap.AddEvidence(audit.EntryKey{Source: r.Source, EventID: r.EventID, Item: r.Item}, r.ExecutionID, r.Kind,
			audit.Outcome(r.Decision), r.Version)
	}
	for _, r := range pending {
		snap.Pending = append(snap.Pending, audit.PendingError{ID: r.ID, ExecutionID: r.ExecutionID, Root: r.Root,
			Record: r.record()})
	}
	for _, r := range known {
		snap.Errors[r.DedupeKey] = r.record()
	}
	return snap, nil
}

// writeArgs are the named parameters of LedgerWrite: each row set one JSON
// array of objects, read by name.
type writeArgs struct {
	Events     string `db:"events"`
	Items      string `db:"items"`
	Executions string `db:"executions"`
	Presences  string `db:"presences"`
	History    string `db:"history"`
	Outbox     string `db:"outbox"`
	Counters   string `db:"counters"`
	Waits      string `db:"waits"`
	Links      string `db:"links"`
	ReRoots    string `db:"reroots"`
	Now        any    `db:"now"`
	Hour       any    `db:"hour"`
	Shard      int    `db:"shard"`
}

// write writes a batch's plan in tx: its new errors first (their ids go
// into the history lines and alerts that name them), then everything else
// in one statement (LedgerWrite: one data-modifying statement on
// PostgreSQL, a statement a table on SQLite), then the group alerts. A new
// key another session made meanwhile fails on the unique key, and the
// batch runs again.
func (s *Store) write(ctx context.Context, tx *sqlx.Tx, p *audit.Plan, now time.Time) (map[string]int64, error) {
	ids, err := s.writeErrors(ctx, tx, p, now)
	if err != nil {
		return nil, err
	}
	for i := range p.Lines {
		if id, ok := ids[p.Lines[i].ErrorKey]; ok && p.Lines[i].ErrorKey != "" {
			p.Lines[i].ErrorID = &id
		}
	}
	var a writeArgs
	var events []eventRow
	var items []itemRow
	for _, e := range p.Entries {
		if e.Item == "" {
			events = append(events, eventRowOf(e))
		} else {
			items = append(items, itemRowOf(e))
		}
	}
	execs := make([]executionRow, len(p.Execs))
	for i, x := range p.Execs {
		execs[i] = executionRowOf(x, now)
	}
	presences := make([]presenceRow, len(p.Presences))
	for i, pr := range p.Presences {
		presences[i] = presenceRowOf(pr)
	}
	history := make([]historyRow, len(p.Lines))
	for i, l := range p.Lines {
		history[i] = historyRowOf(l)
	}
	var outbox []outboxRow
	for _, n := range p.Notices {
		if id := ids[n.ErrorKey]; n.ErrorKey != "" && id != 0 {
			n.Alert.ErrorID = id
		}
		row, err := outboxRowOf(n.Thread, n.Role, n.Alert)
		if err != nil {
			return nil, err
		}
		row.DueAt = at(now.Add(time.Duration(n.Due) * time.Second))
		outbox = append(outbox, row)
	}
	a = writeArgs{Events: rowSet(events), Items: rowSet(items), Executions: rowSet(execs), Presences: rowSet(presences),
		History: rowSet(history), Outbox: rowSet(outbox), Counters: rowSet(counterRows(p.Counters)),
		Waits: rowSet(p.Waits), Links: rowSet(p.Links), ReRoots: rowSet(p.ReRoots),
		Now: s.t(now), Hour: s.t(now.UTC().Truncate(time.Hour)), Shard: s.shard(tx)}
	if _, err := s.namedExec(ctx, tx, "write ledger", s.q.LedgerWrite, a); err != nil {
		return nil, err
	}
	for _, g := range p.Groups {
		if id := ids[g.ErrorKey]; g.ErrorKey != "" && id != 0 {
			g.Alert.ErrorID = id
		}
		if err := s.alertGroup(ctx, tx, g, now); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// writeErrors records the plan's new errors and merges what second reports
// add to recorded ones; it returns the new errors' ids by dedupe key.
func (s *Store) writeErrors(ctx context.Context, tx *sqlx.Tx, p *audit.Plan, now time.Time) (map[string]int64, error) {
	var rows []errorRow
	for _, w := range p.Errors {
		if w.Merge != nil {
			m := w.Merge
			if _, err := s.namedExec(ctx, tx, "merge error", s.q.ErrorMerge, map[string]any{
				"id": m.ID, "retry_of": m.RetryOf, "workflow_id": m.WorkflowID, "workflow_name": m.WorkflowName,
				"mode": m.Mode, "node": m.Node, "message": m.Message, "http_code": m.HTTPCode, "url": m.URL,
				"payload": m.Payload, "truncated": m.PayloadTruncated}); err != nil {
				return nil, err
			}
			continue
		}
		r := w.Report
		row := errorRow{DedupeKey: r.DedupeKey, Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf,
			Root: w.Root, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Mode: r.Mode, Node: r.Node,
			Message: r.Message, HTTPCode: r.HTTPCode, URL: r.URL, Payload: r.Payload,
			PayloadTruncated: flag(r.Truncated), Note: r.Note}
		if w.Link != nil {
			row.Source, row.EventID = &w.Link.Source, &w.Link.EventID
		}
		rows = append(rows, row)
	}
	ids := map[string]int64{}
	if len(rows) == 0 {
		return ids, nil
	}
	var inserted []struct {
		ID        int64  `db:"id"`
		DedupeKey string `db:"dedupe_key"`
	}
	if err := s.namedSelect(ctx, tx, &inserted, "record errors", s.q.ErrorBatchInsert, struct {
		Errors string `db:"errors"`
		Now    any    `db:"now"`
	}{rowSet(rows), s.t(now)}); err != nil {
		return nil, err
	}
	if len(inserted) != len(rows) {
		// Another session recorded one of them since the batch read its
		// dedupe keys: decide again, seeing it.
		return nil, errDecideAgain
	}
	for _, e := range inserted {
		ids[e.DedupeKey] = e.ID
	}
	return ids, nil
}

// counterRows are the plan's counters in key order, so that two batches
// that drew one shard lock its rows in the same order.
func counterRows(c map[audit.CounterKey]int) []counterRow {
	rows := make([]counterRow, 0, len(c))
	for k, n := range c {
		rows = append(rows, counterRow{Source: k.Source, WorkflowID: k.WorkflowID, Metric: k.Metric, N: n})
	}
	slices.SortFunc(rows, func(a, b counterRow) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.WorkflowID, b.WorkflowID), cmp.Compare(a.Metric, b.Metric))
	})
	return rows
}

// rowSet marshals a batch's rows as one JSON array: an empty set is [].
func rowSet[T any](rows []T) string {
	if len(rows) == 0 {
		return "[]"
	}
	raw, _ := json.Marshal(rows) // strings, booleans, numbers and times only: it cannot fail
	return string(raw)
}

// inTx runs fn in a transaction and commits it. A PostgreSQL serialization
// failure or deadlock runs fn again, up to three times: fn must not have
// effects outside the transaction.
func (s *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.tryTx(ctx, fn); err == nil || !s.retryable(err) {
			return err
		}
	}
	return err
}

func (s *Store) tryTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	if s.writer != nil {
		select {
		case s.writer <- struct{}{}:
			defer func() { <-s.writer }()
		case <-ctx.Done():
			return s.dbError("wait for the writer", ctx.Err())
		}
	}
	start := time.Now()
	tx, err := s.db.BeginTxx(ctx, nil)
	if err == nil && s.txSetup != "" {
		if _, err = tx.ExecContext(ctx, s.txSetup); err != nil {
			tx.Rollback()
		}
	}
	s.metrics.Ran("begin", start)
	if err != nil {
		return s.dbError("begin", err)
	}
	defer s.shards.Delete(tx)
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	start = time.Now()
	err = tx.Commit()
	s.metrics.Ran("commit", start)
	if err != nil {
		return s.commitError(err)
	}
	s.lastCommit.Store(time.Now().UnixNano())
	return nil
}
