package store

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

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
