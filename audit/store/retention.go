package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// retentionBatch is the number of done entries (or unlinked errors) one
// Prune deletes: small enough that no transaction holds many locks or
// blocks claims for long.
const retentionBatch = 100

// Prune deletes one batch of done entries whose last activity is older
// than before (with their items, history, errors and alerts), one batch of
// errors linked to no event received before it, and executions nothing
// refers to; it drops raw payloads received before payloadBefore. A
// processing or failed entry is never deleted: its key must keep stopping
// redeliveries; nor is an error that a remaining entry's history points at.
// Call it until it returns zero counts.
func (s *Store) Prune(ctx context.Context, before, payloadBefore time.Time) (audit.Pruned, error) {
	var p audit.Pruned
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		p = audit.Pruned{}
		arg := map[string]any{"before": s.t(before), "batch": retentionBatch}
		var err error
		if p.Events, err = s.pruneEvents(ctx, tx, arg); err != nil {
			return err
		}
		if p.Errors, err = s.pruneUnlinked(ctx, tx, arg); err != nil {
			return err
		}
		if p.Executions, err = s.execEach(ctx, tx, arg, "prune group threads", s.q.ThreadPruneOfGroups,
			"prune alert groups", s.q.GroupPrune, "prune executions", s.q.ExecutionPrune); err != nil {
			return err
		}
		arg["before"] = s.t(payloadBefore)
		p.Payloads, err = s.namedExec(ctx, tx, "drop payloads", s.q.ErrorDropPayloads, arg)
		return err
	})
	return p, err
}

func (s *Store) pruneEvents(ctx context.Context, tx *sqlx.Tx, arg map[string]any) (int64, error) {
	var keys []audit.EventKey
	if err := s.namedSelect(ctx, tx, &keys, "find done entries", s.q.EventFindDone, arg); err != nil {
		return 0, err
	}
	var n int64
	for _, k := range keys {
		deleted, err := s.execEach(ctx, tx, map[string]any{"source": k.Source, "event_id": k.EventID,
			"before": arg["before"], "thread": audit.EventThread(k.Source, k.EventID)},
			"prune event errors", s.q.ErrorPruneOfEvent, "relink kept errors", s.q.ErrorRelinkOfEvent,
			"prune event alerts", s.q.OutboxPruneOfEvent, "prune event thread", s.q.ThreadPruneOfEvent,
			"prune event", s.q.EventPrune)
		if err != nil {
			return n, err
		}
		n += deleted
	}
	return n, nil
}

// pruneUnlinked deletes a batch of errors linked to no event, with their
// alerts and threads (the ids and threads are JSON arrays: sql/errors.sql's
// in_ids and in_threads).
func (s *Store) pruneUnlinked(ctx context.Context, tx *sqlx.Tx, arg map[string]any) (int64, error) {
	var ids []int64
	if err := s.namedSelect(ctx, tx, &ids, "find unlinked errors", s.q.ErrorFindUnlinked, arg); err != nil || len(ids) == 0 {
		return 0, err
	}
	threads := make([]string, len(ids))
	for i, id := range ids {
		threads[i] = audit.ErrorThread(id)
	}
	return s.execEach(ctx, tx, map[string]any{"ids": rowSet(ids), "threads": rowSet(threads)},
		"prune error alerts", s.q.OutboxPruneOfErrors, "prune error threads", s.q.ThreadPruneOfErrors,
		"prune errors", s.q.ErrorPrune)
}

// PruneAll runs Prune until nothing is left to delete (or ctx ends), one
// short transaction per batch, and returns the totals.
func (s *Store) PruneAll(ctx context.Context, before, payloadBefore time.Time) (audit.Pruned, error) {
	var total audit.Pruned
	for ctx.Err() == nil {
		p, err := s.Prune(ctx, before, payloadBefore)
		if err != nil {
			return total, err
		}
		total.Events += p.Events
		total.Errors += p.Errors
		total.Executions += p.Executions
		total.Payloads += p.Payloads
		if p == (audit.Pruned{}) {
			break
		}
	}
	return total, ctx.Err()
}
