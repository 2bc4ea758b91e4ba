package audit

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
)

// Pruned counts what one Prune deleted.
type Pruned struct {
	Events     int64 // done entries, with their items, history, errors and alerts
	Errors     int64 // errors linked to no event
	Executions int64 // executions nothing refers to any more
	Payloads   int64 // raw payloads dropped (the summaries stay)
}

// retentionBatch is the number of rows one statement deletes: small enough
// that no transaction holds many locks or blocks claims for long.
const retentionBatch = 500

// The statements of retention. doneEvents picks one batch of done entries
// whose last activity is older than the cutoff; every statement re-checks
// the condition, so an entry that moved meanwhile stays.
const (
	doneEvents = `SELECT source, event_id FROM webhook_events
		WHERE status = 'done' AND last_seen_at < :before ORDER BY last_seen_at LIMIT :batch`
	pruneEventErrors = `DELETE FROM n8n_errors WHERE (source, event_id) IN (` + doneEvents + `)`
	pruneEventAlerts = `DELETE FROM outbox WHERE (source, event_id) IN (` + doneEvents + `)`
	// (sqlx reads :name as a parameter: a literal colon is written ::.)
	pruneEventThreads = `DELETE FROM slack_threads WHERE thread_key IN (
		SELECT 'event::' || source || '/' || event_id FROM webhook_events
		WHERE status = 'done' AND last_seen_at < :before ORDER BY last_seen_at LIMIT :batch)`
	pruneEvents = `DELETE FROM webhook_events WHERE status = 'done' AND last_seen_at < :before
		AND (source, event_id) IN (` + doneEvents + `)`

	oldUnlinkedErrors = `SELECT id FROM n8n_errors WHERE source IS NULL AND received_at < :before
		ORDER BY id LIMIT :batch`
	pruneErrorAlerts  = `DELETE FROM outbox WHERE error_id IN (` + oldUnlinkedErrors + `)`
	pruneErrorThreads = `DELETE FROM slack_threads WHERE thread_key IN (
		SELECT 'error::' || id FROM n8n_errors WHERE source IS NULL AND received_at < :before
		ORDER BY id LIMIT :batch)`
	pruneErrors = `DELETE FROM n8n_errors WHERE id IN (` + oldUnlinkedErrors + `)`
	// The threads of groups of unlinked errors, and groups closed long ago.
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

// Prune deletes, one batch per statement, done entries whose last activity
// is older than before (with their items, history, errors and alerts),
// errors linked to no event received before it, and executions nothing
// refers to; it drops raw payloads received before payloadBefore. A
// processing or failed entry is never deleted: its key must keep stopping
// redeliveries. Call it until it returns zero counts.
func (s *Store) Prune(ctx context.Context, before, payloadBefore time.Time) (Pruned, error) {
	var p Pruned
	arg := map[string]any{"before": s.d.t(before), "batch": retentionBatch}
	steps := []struct {
		op    string
		query string
		arg   map[string]any
		count *int64
	}{
		{"prune event errors", pruneEventErrors, arg, nil},
		{"prune event alerts", pruneEventAlerts, arg, nil},
		{"prune event threads", pruneEventThreads, arg, nil},
		{"prune events", pruneEvents, arg, &p.Events},
		{"prune error alerts", pruneErrorAlerts, arg, nil},
		{"prune error threads", pruneErrorThreads, arg, nil},
		{"prune errors", pruneErrors, arg, &p.Errors},
		{"prune group threads", pruneGroupThreads, arg, nil},
		{"prune alert groups", pruneGroups, arg, nil},
		{"prune executions", pruneExecutions, arg, &p.Executions},
		{"drop payloads", dropPayloads, map[string]any{"before": s.d.t(payloadBefore), "batch": retentionBatch}, &p.Payloads},
	}
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		p = Pruned{}
		for _, st := range steps {
			n, err := s.namedExec(ctx, tx, st.op, st.query, st.arg)
			if err != nil {
				return err
			}
			if st.count != nil {
				*st.count = n
			}
		}
		return nil
	})
	return p, err
}

// PruneAll runs Prune until nothing is left to delete (or ctx ends), one
// short transaction per batch, and returns the totals.
func (s *Store) PruneAll(ctx context.Context, before, payloadBefore time.Time) (Pruned, error) {
	var total Pruned
	for ctx.Err() == nil {
		p, err := s.Prune(ctx, before, payloadBefore)
		if err != nil {
			return total, err
		}
		total.Events += p.Events
		total.Errors += p.Errors
		total.Executions += p.Executions
		total.Payloads += p.Payloads
		if p == (Pruned{}) {
			break
		}
	}
	return total, ctx.Err()
}
