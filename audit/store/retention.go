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

// The statements of retention. A batch is chosen once and locked (on
// PostgreSQL, skipping rows another transaction holds), then each of its
// entries goes with everything that is only its own, so that the batch is
// consistent: an entry that stays keeps all its rows.
const (
	doneEvents = `SELECT source, event_id FROM webhook_events
		WHERE status = 'done' AND last_seen_at < ? ORDER BY last_seen_at LIMIT ?`
	// An error that another entry's history points at stays, linked to
	// that entry from now on.
	pruneEventErrors = `DELETE FROM n8n_errors WHERE source = :source AND event_id = :event_id
		AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id
			AND NOT (h.source = :source AND h.event_id = :event_id))`
	relinkEventErrors = `UPDATE n8n_errors SET (source, event_id) = (SELECT h.source, h.event_id
		FROM event_history h WHERE h.error_id = n8n_errors.id AND NOT (h.source = :source AND h.event_id = :event_id)
		ORDER BY h.id LIMIT 1)
		WHERE source = :source AND event_id = :event_id`
	pruneEventAlerts  = `DELETE FROM outbox WHERE source = :source AND event_id = :event_id`
	pruneEventThreads = `DELETE FROM slack_threads WHERE thread_key = :thread`
	pruneEvent        = `DELETE FROM webhook_events WHERE source = :source AND event_id = :event_id
		AND status = 'done' AND last_seen_at < :before`

	oldUnlinkedErrors = `SELECT id FROM n8n_errors WHERE source IS NULL AND received_at < ?
		AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id)
		ORDER BY id LIMIT ?`
	pruneErrorAlerts  = `DELETE FROM outbox WHERE error_id IN (?)`
	pruneErrorThreads = `DELETE FROM slack_threads WHERE thread_key IN (?)`
	pruneErrors       = `DELETE FROM n8n_errors WHERE id IN (?) AND source IS NULL`
	// The threads of groups of unlinked errors, and groups closed long ago.
	// (sqlx reads :name as a parameter: a literal colon is written ::.)
	pruneGroupThreads = `DELETE FROM slack_threads WHERE thread_key IN (
		SELECT thread_key FROM slack_threads WHERE thread_key LIKE 'group::%' AND created_at < :before LIMIT :batch)`
	pruneGroups = `DELETE FROM alert_groups WHERE group_key IN (
		SELECT group_key FROM alert_groups WHERE closes_at < :before LIMIT :batch)`

	pruneExecutions = `DELETE FROM executions WHERE execution_id IN (
		SELECT x.execution_id FROM executions x WHERE x.last_seen_at < :before
		AND NOT EXISTS (SELECT 1 FROM event_executions e WHERE e.execution_id = x.execution_id)
		AND NOT EXISTS (SELECT 1 FROM n8n_errors r WHERE r.execution_id = x.execution_id)
		AND NOT EXISTS (SELECT 1 FROM executions c WHERE c.retry_of = x.execution_id)
		LIMIT :batch)`
	dropPayloads = `UPDATE n8n_errors SET payload = '', payload_dropped = true WHERE id IN (
		SELECT id FROM n8n_errors WHERE payload_dropped = false AND payload <> '' AND received_at < :before
		ORDER BY id LIMIT :batch)`
)

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
		arg := map[string]any{"before": s.d.t(before), "batch": retentionBatch}
		for _, st := range []struct{ op, query string }{
			{"prune group threads", pruneGroupThreads}, {"prune alert groups", pruneGroups},
		} {
			if _, err := s.namedExec(ctx, tx, st.op, st.query, arg); err != nil {
				return err
			}
		}
		if p.Executions, err = s.namedExec(ctx, tx, "prune executions", pruneExecutions, arg); err != nil {
			return err
		}
		arg["before"] = s.d.t(payloadBefore)
		p.Payloads, err = s.namedExec(ctx, tx, "drop payloads", dropPayloads, arg)
		return err
	})
	return p, err
}

func (s *Store) pruneEvents(ctx context.Context, tx *sqlx.Tx, before time.Time) (int64, error) {
	var keys []audit.EventKey
	if err := s.selectAll(ctx, tx, &keys, "find done entries", doneEvents+s.d.lockBatch,
		s.d.t(before), retentionBatch); err != nil {
		return 0, err
	}
	var n int64
	for _, k := range keys {
		arg := map[string]any{"source": k.Source, "event_id": k.EventID, "before": s.d.t(before),
			"thread": audit.EventThread(k.Source, k.EventID)}
		for _, st := range []struct{ op, query string }{
			{"prune event errors", pruneEventErrors},
			{"relink kept errors", relinkEventErrors},
			{"prune event alerts", pruneEventAlerts},
			{"prune event thread", pruneEventThreads},
		} {
			if _, err := s.namedExec(ctx, tx, st.op, st.query, arg); err != nil {
				return n, err
			}
		}
		deleted, err := s.namedExec(ctx, tx, "prune event", pruneEvent, arg)
		if err != nil {
			return n, err
		}
		n += deleted
	}
	return n, nil
}

func (s *Store) pruneUnlinked(ctx context.Context, tx *sqlx.Tx, before time.Time) (int64, error) {
	var ids []int64
	if err := s.selectAll(ctx, tx, &ids, "find unlinked errors", oldUnlinkedErrors+s.d.lockBatch,
		s.d.t(before), retentionBatch); err != nil || len(ids) == 0 {
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
		{"prune error alerts", pruneErrorAlerts, ids},
		{"prune error threads", pruneErrorThreads, threads},
		{"prune errors", pruneErrors, ids},
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
