package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

const outboxColumns = `id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
	attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent`

const selectOutbox = `SELECT ` + outboxColumns + ` FROM outbox`

// leaseOutboxQuery picks the due rows that are first in their thread: an
// event's messages go out one at a time and in order. A lease that ran out
// (its worker died) is taken over. Its last parameter, the batch size, is
// the one the dialect's locking clause follows.
const leaseOutboxQuery = `SELECT o.id FROM outbox o
	WHERE (o.state = 'pending' OR (o.state = 'sending' AND o.lease_until < :now)) AND o.due_at <= :now
	AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.thread_key = o.thread_key AND p.id < o.id
		AND p.state IN ('pending', 'sending'))
	ORDER BY o.id LIMIT :limit`

// leaseOutboxStatement leases the rows pick selects. pick is materialized
// first: as a plain subquery of the UPDATE, PostgreSQL may run it once per
// row and lease more rows than its LIMIT. A row taken over from an expired
// lease (state still 'sending') may have been posted by the worker that held
// it: it is marked maybe_sent, and that worker is kept as attempted_by.
func leaseOutboxStatement(pick string) string {
	return `WITH picked AS MATERIALIZED (` + pick + `)
	UPDATE outbox SET state = 'sending', lease_owner = :owner, lease_until = :until, attempts = attempts + 1,
	maybe_sent = (maybe_sent OR state = 'sending'),
	attempted_by = CASE WHEN state = 'sending' THEN lease_owner ELSE attempted_by END,
	first_attempt_at = COALESCE(first_attempt_at, :now)
	WHERE id IN (SELECT id FROM picked)
	AND (state = 'pending' OR (state = 'sending' AND lease_until < :now))
	RETURNING ` + outboxColumns
}

// LeaseOutbox takes up to limit due rows for owner until the lease ends.
// Two workers, in one process or in several instances on one database,
// never hold the same row: PostgreSQL skips rows another transaction is
// leasing, SQLite has one writer. The worker leases one row at a time,
// right before sending it, and renews the lease while the send runs.
func (s *Store) LeaseOutbox(ctx context.Context, owner string, lease time.Duration, limit int) ([]audit.OutboxRow, error) {
	now := s.now()
	query, args, err := sqlx.Named(s.d.leaseOutbox, map[string]any{
		"owner": owner, "until": s.d.t(now.Add(lease)), "now": s.d.t(now), "limit": limit,
	})
	if err != nil {
		return nil, &audit.Error{Code: audit.CodeInternal, Message: "bind lease", Err: err}
	}
	var rows []audit.OutboxRow
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		rows = nil
		return s.selectAll(ctx, tx, &rows, "lease outbox", query, args...)
	})
	return rows, err
}

// RenewOutbox extends owner's lease of a row to lease from now. It reports
// whether owner still held it: false means the lease ran out and another
// worker may have taken the row over.
func (s *Store) RenewOutbox(ctx context.Context, id int64, owner string, lease time.Duration) (bool, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		n, err = s.namedExec(ctx, tx, "renew outbox lease", `UPDATE outbox SET lease_until = :until
			WHERE id = :id AND lease_owner = :owner AND state = 'sending'`,
			map[string]any{"until": s.d.t(s.now().Add(lease)), "id": id, "owner": owner})
		return err
	})
	return n == 1, err
}

// ReleaseOutbox gives back a row owner leased and never attempted (the
// channel is paused, or the process is stopping): it is due again at due,
// and the attempt it was leased for is not counted.
func (s *Store) ReleaseOutbox(ctx context.Context, id int64, owner string, due time.Time) (bool, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		n, err = s.namedExec(ctx, tx, "release outbox row", `UPDATE outbox SET state = 'pending',
			lease_owner = '', lease_until = NULL, due_at = :due, attempts = attempts - 1,
			first_attempt_at = CASE WHEN attempts <= 1 THEN NULL ELSE first_attempt_at END
			WHERE id = :id AND lease_owner = :owner AND state = 'sending'`,
			map[string]any{"due": s.d.t(due), "id": id, "owner": owner})
		return err
	})
	return n == 1, err
}

// FinishOutbox records how an attempt ended, if owner still holds the row's
// lease. It reports whether it did: false means the lease ran out and
// another worker took the row over.
func (s *Store) FinishOutbox(ctx context.Context, id int64, owner string, d audit.Attempt) (bool, error) {
	now := s.now()
	due := now
	if !d.RetryAt.IsZero() {
		due = d.RetryAt
	}
	var sentAt any
	if d.State == audit.OutboxSent {
		sentAt = s.d.t(now)
	}
	var n int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		n, err = s.namedExec(ctx, tx, "finish outbox", `UPDATE outbox SET state = :state, due_at = :due,
		last_error = :last_error, sent_at = :sent_at, channel = :channel, ts = :ts, lease_owner = '', lease_until = NULL,
		attempted_by = :owner, maybe_sent = :maybe_sent
		WHERE id = :id AND lease_owner = :owner AND state = 'sending'`, map[string]any{
			"state": d.State, "due": s.d.t(due), "last_error": d.LastError, "sent_at": sentAt,
			"channel": d.Destination, "ts": d.MessageID, "id": id, "owner": owner,
			"maybe_sent": d.MaybeSent && d.State == audit.OutboxPending,
		})
		if err != nil || n != 1 || d.Root == nil {
			return err
		}
		return s.saveRoot(ctx, tx, *d.Root)
	})
	if err == nil && n == 1 {
		s.metrics.Delivered(d.State)
	}
	return n == 1, err
}

// Superseded reports whether a later refresh of the same thread waits to
// be sent: the first message needs bringing up to date only once.
func (s *Store) Superseded(ctx context.Context, row audit.OutboxRow) (bool, error) {
	var later bool
	err := s.get(ctx, s.db, &later, "read outbox", `SELECT EXISTS (SELECT 1 FROM outbox WHERE thread_key = ?
		AND kind = 'refresh' AND id > ? AND state IN ('pending', 'sending'))`, row.ThreadKey, row.ID)
	return later, err
}

// Stats counts the outbox and the review queue.
func (s *Store) Stats(ctx context.Context) (audit.Stats, error) {
	var st audit.Stats
	if err := s.get(ctx, s.db, &st.OutboxDepth, "count outbox",
		`SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')`); err != nil {
		return st, err
	}
	if st.OutboxDepth > 0 {
		var row audit.OutboxRow
		err := s.get(ctx, s.db, &row, "read outbox", selectOutbox+
			` WHERE state IN ('pending', 'sending') ORDER BY id LIMIT 1`)
		if err != nil && !isNoRows(err) {
			return st, err
		}
		if !row.CreatedAt.IsZero() {
			st.OutboxOldestAge = s.now().Sub(row.CreatedAt)
		}
	}
	err := s.get(ctx, s.db, &st.ReviewQueue, "count review queue", `SELECT count(*) FROM webhook_events
		WHERE status = 'processing' AND (review_reason <> '' OR updated_at < ?)`, s.d.t(s.reviewCutoff()))
	return st, err
}

// OutboxEvent returns the event an outbox row tells about: the short link of
// a message whose audit URL is too long for Slack names the row.
func (s *Store) OutboxEvent(ctx context.Context, id int64) (audit.EventKey, error) {
	var k audit.EventKey
	err := s.get(ctx, s.db, &k, "read outbox", `SELECT source, event_id FROM outbox WHERE id = ? AND source <> ''`, id)
	if isNoRows(err) {
		return k, audit.Errorf(audit.CodeNotFound, "no alert %d about an event", id)
	}
	return k, err
}
