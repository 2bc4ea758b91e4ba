package store

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

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
