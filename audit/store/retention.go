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
		var err error
		if p.Events, err = s.pruneEvents(ctx, tx, before); err != nil {
			return err
		}
		if p.Errors, err = s.pruneUnlinked(ctx, tx, before); err != nil {
			return err
		}
		arg := map[string]any{"before": s.t(before), "batch": retentionBatch}
		for _, st := range []struct{ op, query string }{
			{"prune group threads", s.q.ThreadPruneOfGroups}, {"prune alert groups", s.q.GroupPrune},
		} {
			if _, err := s.namedExec(ctx, tx, st.op, st.query, arg); err != nil {
				return err
			}
		}
		if p.Executions, err = s.namedExec(ctx, tx, "prune executions", s.q.ExecutionPrune, arg); err != nil {
			return err
		}
		arg["before"] = s.t(payloadBefore)
		p.Payloads, err = s.namedExec(ctx, tx, "drop payloads", s.q.ErrorDropPayloads, arg)
		return err
	})
	return p, err
}

func (s *Store) pruneEvents(ctx context.Context, tx *sqlx.Tx, before time.Time) (int64, error) {
	var keys []audit.EventKey
	if err := s.selectAll(ctx, tx, &keys, "find done entries", s.q.EventFindDone,
		s.t(before), retentionBatch); err != nil {
		return 0, err
	}
	var n int64
	for _, k := range keys {
		arg := map[string]any{"source": k.Source, "event_id": k.EventID, "before": s.t(before),
			"thread": audit.EventThread(k.Source, k.EventID)}
		for _, st := range []struct{ op, query string }{
			{"prune event errors", s.q.ErrorPruneOfEvent},
			{"relink kept errors", s.q.ErrorRelinkOfEvent},
			{"prune event alerts", s.q.OutboxPruneOfEvent},
			{"prune event thread", s.q.ThreadPruneOfEvent},
		} {
			if _, err := s.namedExec(ctx, tx, st.op, st.query, arg); err != nil {
				return n, err
			}
		}
		deleted, err := s.namedExec(ctx, tx, "prune event", s.q.EventPrune, arg)
		if err != nil {
			return n, err
		}
		n += deleted
	}
	return n, nil
}

func (s *Store) pruneUnlinked(ctx context.Context, tx *sqlx.Tx, before time.Time) (int64, error) {
	var ids []int64
	if err := s.selectAll(ctx, tx, &ids, "find unlinked errors", s.q.ErrorFindUnlinked,
		s.t(before), retentionBatch); err != nil || len(ids) == 0 {
		return 0, err
	}
	threads := make([]string, len(ids))
	for i, id := range ids {
		threads[i] = audit.ErrorThread(id)
	}
	var n int64
	for _, st := range []struct {
		op, query string
		arg       any
	}{
		{"prune error alerts", s.q.OutboxPruneOfErrors, ids},
		{"prune error threads", s.q.ThreadPruneOfErrors, threads},
		{"prune errors", s.q.ErrorPrune, ids},
	} {
		query, args, err := sqlx.In(st.query, st.arg)
		if err != nil {
			return 0, &audit.Error{Code: audit.CodeInternal, Message: st.op + ": bind", Err: err}
		}
		if n, err = s.exec(ctx, tx, st.op, query, args...); err != nil {
			return 0, err
		}
	}
	return n, nil
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
