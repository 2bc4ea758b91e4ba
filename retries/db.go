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
	// takes it. It is not sent yet (sent_at 0) until itemClaim.
	itemTake = `UPDATE retry_items SET state = 'sending', updated_at = :now WHERE id = :id AND state = 'planned'`
	// itemClaim is the last word before a run's item is written in the
	// ledger and sent to n8n: the item is still being sent, by this owner,
	// of a run still running (not cancelled, not adopted by another), and
	// no other retry of its entry is pending. itemConfirm says it again
	// just before n8n is asked.
	itemClaim = `UPDATE retry_items SET version = :version, execution_id = :execution_id, sent_at = :sent_at,
		updated_at = :updated_at
		WHERE id = :id AND state = 'sending' AND sent_at = 0
		AND EXISTS (SELECT 1 FROM retry_runs r WHERE r.id = retry_items.run_id AND r.owner = :owner AND r.state = 'running')
		AND NOT EXISTS (SELECT 1 FROM retry_items p WHERE p.source = :source AND p.event_id = :event_id
			AND p.item = :item AND p.id <> :id AND p.state IN ('sending', 'no_answer', 'unknown') AND (p.sent_at > :recent OR p.state = 'unknown')
			AND p.version >= :version)`
	itemConfirm = `UPDATE retry_items SET updated_at = :updated_at
		WHERE id = :id AND state = 'sending' AND sent_at = :sent_at
		AND EXISTS (SELECT 1 FROM retry_runs r WHERE r.id = retry_items.run_id AND r.owner = :owner AND r.state = 'running')`
	// itemInsertPending records a single retry before it is written in the
	// ledger, unless another retry of the entry is pending: the ledger's
	// version fences two retries of the same version, this one a retry
	// seen after another's ledger line (a later version).
	itemInsertPending = `INSERT INTO retry_items (run_id, source, event_id, item, version, execution_id, state, reason,
		actor, via, sent_at, updated_at)
		SELECT NULL, :source, :event_id, :item, :version, :execution_id, 'sending', '', :actor, :via, :sent_at, :updated_at
		WHERE NOT EXISTS (SELECT 1 FROM retry_items p WHERE p.source = :source AND p.event_id = :event_id
			AND p.item = :item AND p.state IN ('sending', 'no_answer', 'unknown') AND (p.sent_at > :recent OR p.state = 'unknown')
			AND p.version >= :version)
		RETURNING id`
	// itemDrop forgets a single retry the ledger refused: nothing was sent.
	itemDrop = `DELETE FROM retry_items WHERE id = :id AND run_id IS NULL AND state = 'sending'`
	// itemUnsent settles a run's item that was taken but not sent because
	// the run stopped first.
	itemUnsent = `UPDATE retry_items SET state = 'cancelled', updated_at = :now,
		reason = 'not sent: the run was cancelled or taken over before it was sent'
		WHERE id = :id AND state = 'sending'`
	itemSet = `UPDATE retry_items SET state = :state, reason = :reason, execution_id = :execution_id,
		version = :version, new_execution_id = :new_execution_id, n8n_status = :n8n_status, sent_at = :sent_at,
		updated_at = :updated_at WHERE id = :id`
	// itemsCancel and itemsInterrupted settle what a run left: the planned
	// ones were never sent; those being sent when its owner stopped may
	// have been.
	// A taken item not claimed yet (sent_at 0) cannot be claimed any more
	// once its run is cancelled or adopted (itemClaim): it was not sent.
	itemsCancel = `UPDATE retry_items SET state = 'cancelled', updated_at = :now WHERE run_id = :run_id
		AND (state = 'planned' OR state = 'sending' AND sent_at = 0)`
	itemsInterrupted = `UPDATE retry_items SET state = 'unknown', updated_at = :now,
		reason = 'the instance running it stopped while n8n was asked; it blocks another retry until a person settles the entry or the Retry reports'
		WHERE run_id = :run_id AND state = 'sending' AND sent_at > 0`
	itemsUntaken = `UPDATE retry_items SET state = 'planned', updated_at = :now WHERE run_id = :run_id
		AND state = 'sending' AND sent_at = 0`
	// itemPending is an entry's latest retry still waiting for its outcome:
	// being sent, not answered by n8n, or left by a stopped instance
	// (unknown: it may be running in n8n).
	itemPending = `SELECT ` + itemColumns + ` FROM retry_items
		WHERE source = :source AND event_id = :event_id AND item = :item AND state IN ('sending', 'no_answer', 'unknown')
		AND sent_at > 0 AND id <> :id
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
