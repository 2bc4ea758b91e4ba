package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/jmoiron/sqlx"
)

// The states of an outbox row.
const (
	OutboxPending      = "pending"
	OutboxSending      = "sending"      // leased by a worker
	OutboxSent         = "sent"         //
	OutboxDead         = "dead"         // a permanent error: last_error says which
	OutboxUnconfigured = "unconfigured" // no notifier configured when it was due
	OutboxSkipped      = "skipped"      // not needed any more: last_error says why
)

// OutboxRow is one message to send.
type OutboxRow struct {
	ID         int64         `db:"id"`
	CreatedAt  time.Time     `db:"created_at"`
	DueAt      time.Time     `db:"due_at"`
	ThreadKey  string        `db:"thread_key"`
	Kind       string        `db:"kind"`
	Source     string        `db:"source"`
	EventID    string        `db:"event_id"`
	ErrorID    sql.NullInt64 `db:"error_id"`
	Payload    string        `db:"payload"`
	State      string        `db:"state"`
	Attempts   int           `db:"attempts"`
	LastError  string        `db:"last_error"`
	SentAt     sql.NullTime  `db:"sent_at"`
	LeaseOwner string        `db:"lease_owner"`
	// Destination and MessageID say where the notifier posted the message
	// and its id there, in the notifier's own terms.
	Destination string `db:"channel"`
	MessageID   string `db:"ts"`
	// AttemptedBy names the worker that last attempted the row.
	AttemptedBy string `db:"attempted_by"`
	// FirstAttemptAt is when the first attempt began.
	FirstAttemptAt sql.NullTime `db:"first_attempt_at"`
	// MaybeSent says that the notifier may have posted the message already: an
	// attempt ended in a timeout or a reset connection, or the worker that
	// leased the row died with it.
	MaybeSent bool `db:"maybe_sent"`
}

// Alert decodes the row's payload.
func (r OutboxRow) Alert() (Alert, error) {
	var a Alert
	err := json.Unmarshal([]byte(r.Payload), &a)
	return a, err
}

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
func (s *Store) LeaseOutbox(ctx context.Context, owner string, lease time.Duration, limit int) ([]OutboxRow, error) {
	now := s.now()
	query, args, err := sqlx.Named(s.d.leaseOutbox, map[string]any{
		"owner": owner, "until": s.d.t(now.Add(lease)), "now": s.d.t(now), "limit": limit,
	})
	if err != nil {
		return nil, &Error{Code: CodeInternal, Message: "bind lease", Err: err}
	}
	var rows []OutboxRow
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

// Attempt is how one attempt to send a row ended.
type Attempt struct {
	State     string    // OutboxSent, OutboxPending (retry), OutboxDead, OutboxUnconfigured, OutboxSkipped
	RetryAt   time.Time // for a retry
	LastError string
	// Destination and MessageID, for a sent row, say where the message went.
	Destination string
	MessageID   string
	// MaybeSent, for a retry, says that the notifier may have posted the message.
	MaybeSent bool
	// Root, for a sent row whose message opened its thread, is kept in the
	// same transaction as the row's state: a root is never lost between them.
	Root *ThreadRoot
}

// FinishOutbox records how an attempt ended, if owner still holds the row's
// lease. It reports whether it did: false means the lease ran out and
// another worker took the row over.
func (s *Store) FinishOutbox(ctx context.Context, id int64, owner string, d Attempt) (bool, error) {
	now := s.now()
	due := now
	if !d.RetryAt.IsZero() {
		due = d.RetryAt
	}
	var sentAt any
	if d.State == OutboxSent {
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
			"maybe_sent": d.MaybeSent && d.State == OutboxPending,
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
func (s *Store) Superseded(ctx context.Context, row OutboxRow) (bool, error) {
	var later bool
	err := s.get(ctx, s.db, &later, "read outbox", `SELECT EXISTS (SELECT 1 FROM outbox WHERE thread_key = ?
		AND kind = 'refresh' AND id > ? AND state IN ('pending', 'sending'))`, row.ThreadKey, row.ID)
	return later, err
}

// Stats are the figures the metrics and the self-check read.
type Stats struct {
	OutboxDepth     int
	OutboxOldestAge time.Duration
	ReviewQueue     int
}

// Stats counts the outbox and the review queue.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	if err := s.get(ctx, s.db, &st.OutboxDepth, "count outbox",
		`SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')`); err != nil {
		return st, err
	}
	if st.OutboxDepth > 0 {
		var row OutboxRow
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
func (s *Store) OutboxEvent(ctx context.Context, id int64) (EventKey, error) {
	var k EventKey
	err := s.get(ctx, s.db, &k, "read outbox", `SELECT source, event_id FROM outbox WHERE id = ? AND source <> ''`, id)
	if isNoRows(err) {
		return k, errorf(CodeNotFound, "no alert %d about an event", id)
	}
	return k, err
}
