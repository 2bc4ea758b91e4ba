package retries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
)

// The tables of migration 00013 (retry_runs, retry_items), read and
// written by name on the store's pool; times are Unix milliseconds, the
// same on both databases.

const (
	runInsert = `INSERT INTO retry_runs (created_by, via, filter, state, rate, in_flight, owner, heartbeat_at, created_at)
		VALUES (:created_by, :via, :filter, :state, :rate, :in_flight, :owner, :heartbeat_at, :created_at) RETURNING id`
	runRead = `SELECT id, created_by, via, filter, state, rate, in_flight, owner, heartbeat_at, cancelled_by, created_at, finished_at
		FROM retry_runs WHERE id = :id`
	runList = `SELECT id, created_by, via, filter, state, rate, in_flight, owner, heartbeat_at, cancelled_by, created_at, finished_at
		FROM retry_runs ORDER BY id DESC LIMIT :limit`
	runHeartbeat = `UPDATE retry_runs SET heartbeat_at = :now WHERE id = :id AND owner = :owner AND state = 'running'`
	// runAdopt takes over a running run whose owner stopped beating.
	runAdopt = `UPDATE retry_runs SET owner = :owner, heartbeat_at = :now
		WHERE id = :id AND state = 'running' AND heartbeat_at = :seen`
	runOrphans = `SELECT id, heartbeat_at FROM retry_runs WHERE state = 'running' AND heartbeat_at < :stale`
	runCancel  = `UPDATE retry_runs SET state = 'cancelled', cancelled_by = :who, finished_at = :now
		WHERE id = :id AND state = 'running'`
	runFinish = `UPDATE retry_runs SET state = 'finished', finished_at = :now WHERE id = :id AND state = 'running'`

	itemInsert = `INSERT INTO retry_items (run_id, source, event_id, item, version, execution_id, state, reason, actor,
		via, sent_at, updated_at)
		VALUES (:run_id, :source, :event_id, :item, :version, :execution_id, :state, :reason, :actor, :via, :sent_at,
		:updated_at) RETURNING id`
	itemColumns = `id, run_id, source, event_id, item, version, execution_id, state, reason, actor, via,
		new_execution_id, n8n_status, sent_at, updated_at`
	itemsOfRun = `SELECT ` + itemColumns + ` FROM retry_items WHERE run_id = :run_id ORDER BY id`
	// itemNext is a run's next planned item.
	itemNext = `SELECT ` + itemColumns + ` FROM retry_items WHERE run_id = :run_id AND state = 'planned'
		ORDER BY id LIMIT 1`
	// itemTake marks an item as being sent, once: of two instances, one
	// takes it.
	itemTake = `UPDATE retry_items SET state = 'sending', updated_at = :now WHERE id = :id AND state = 'planned'`
	itemSet  = `UPDATE retry_items SET state = :state, reason = :reason, execution_id = :execution_id,
		version = :version, new_execution_id = :new_execution_id, n8n_status = :n8n_status, sent_at = :sent_at,
		updated_at = :updated_at WHERE id = :id`
	// itemsCancel and itemsInterrupted settle what a run left: the planned
	// ones were never sent; those being sent when its owner stopped may
	// have been.
	itemsCancel      = `UPDATE retry_items SET state = 'cancelled', updated_at = :now WHERE run_id = :run_id AND state = 'planned'`
	itemsInterrupted = `UPDATE retry_items SET state = 'unknown', updated_at = :now,
		reason = 'the instance running it stopped while n8n was asked; look at the event before retrying again'
		WHERE run_id = :run_id AND state = 'sending'`
	// itemPending is an entry's latest retry still waiting for its outcome.
	itemPending = `SELECT ` + itemColumns + ` FROM retry_items
		WHERE source = :source AND event_id = :event_id AND item = :item AND state IN ('sending', 'no_answer') AND sent_at > 0
		ORDER BY id DESC LIMIT 1`
)

// Retention: items settled before the cutoff, then the ended runs left
// without items.
const (
	itemsPrune = `DELETE FROM retry_items WHERE updated_at < :before AND state NOT IN ('planned', 'sending')`
	runsPrune  = `DELETE FROM retry_runs WHERE state <> 'running' AND created_at < :before
		AND NOT EXISTS (SELECT 1 FROM retry_items i WHERE i.run_id = retry_runs.id)`
)

// candidates are the entries a filter selects that are not done, and the
// count of the done ones (listed only when named).
const (
	eventsOfFilter = `SELECT e.source, e.event_id FROM webhook_events e
		WHERE e.status <> 'done' AND (:source = '' OR e.source = :source)
		AND e.created_at >= :from AND e.created_at < :to
		AND (:workflow = '' OR EXISTS (SELECT 1 FROM executions x
			WHERE x.execution_id = e.holder_execution_id AND x.workflow_id = :workflow))
		ORDER BY e.created_at, e.source, e.event_id LIMIT :limit`
	doneOfFilter = `SELECT COUNT(*) FROM webhook_events e
		WHERE e.status = 'done' AND (:source = '' OR e.source = :source)
		AND e.created_at >= :from AND e.created_at < :to
		AND (:workflow = '' OR EXISTS (SELECT 1 FROM executions x
			WHERE x.execution_id = e.holder_execution_id AND x.workflow_id = :workflow))`
)

// db runs named statements on the store's pool.
type db struct{ x *sqlx.DB }

func (d db) get(ctx context.Context, dest any, query string, arg any) error {
	q, args, err := sqlx.Named(query, arg)
	if err != nil {
		return fmt.Errorf("retries: %w", err)
	}
	if err := d.x.GetContext(ctx, dest, d.x.Rebind(q), args...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return &audit.Error{Code: audit.CodeUnavailable, Message: "retries: the database did not answer", Err: err}
	}
	return nil
}

func (d db) list(ctx context.Context, dest any, query string, arg any) error {
	q, args, err := sqlx.Named(query, arg)
	if err != nil {
		return fmt.Errorf("retries: %w", err)
	}
	if err := d.x.SelectContext(ctx, dest, d.x.Rebind(q), args...); err != nil {
		return &audit.Error{Code: audit.CodeUnavailable, Message: "retries: the database did not answer", Err: err}
	}
	return nil
}

func (d db) exec(ctx context.Context, query string, arg any) (int64, error) {
	q, args, err := sqlx.Named(query, arg)
	if err != nil {
		return 0, fmt.Errorf("retries: %w", err)
	}
	res, err := d.x.ExecContext(ctx, d.x.Rebind(q), args...)
	if err != nil {
		return 0, &audit.Error{Code: audit.CodeUnavailable, Message: "retries: the database did not answer", Err: err}
	}
	return res.RowsAffected()
}

// namedGet runs a statement in a transaction and scans its one row.
func namedGet(ctx context.Context, tx *sqlx.Tx, dest any, query string, arg any) error {
	q, args, err := sqlx.Named(query, arg)
	if err != nil {
		return fmt.Errorf("retries: %w", err)
	}
	if err := tx.GetContext(ctx, dest, tx.Rebind(q), args...); err != nil {
		return &audit.Error{Code: audit.CodeUnavailable, Message: "retries: the database did not answer", Err: err}
	}
	return nil
}
