package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// LeaseOutbox takes up to limit due rows for owner until the lease ends.
// Two workers, in one process or in several instances on one database,
// never hold the same row: PostgreSQL skips rows another transaction is
// leasing, SQLite has one writer. The worker leases one row at a time,
// right before sending it, and renews the lease while the send runs.
func (s *Store) LeaseOutbox(ctx context.Context, owner string, lease time.Duration, limit int) ([]audit.OutboxRow, error) {
	now := s.now()
	arg := map[string]any{"owner": owner, "until": s.t(now.Add(lease)), "now": s.t(now), "limit": limit}
	var rows []audit.OutboxRow
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		rows, err = selectAs(ctx, s, tx, "lease outbox", s.q.OutboxLease, arg, outboxRow.message)
		return err
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
		n, err = s.namedExec(ctx, tx, "renew outbox lease", s.q.OutboxRenewLease,
			map[string]any{"until": s.t(s.now().Add(lease)), "id": id, "owner": owner})
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
		n, err = s.namedExec(ctx, tx, "release outbox row", s.q.OutboxRelease,
			map[string]any{"due": s.t(due), "id": id, "owner": owner})
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
		sentAt = s.t(now)
	}
	var n int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		n, err = s.namedExec(ctx, tx, "finish outbox", s.q.OutboxFinish, map[string]any{
			"state": d.State, "due": s.t(due), "last_error": d.LastError, "sent_at": sentAt,
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
	err := s.one(ctx, s.db, &later, "read outbox", s.q.OutboxRefreshWaits, map[string]any{"thread": row.ThreadKey, "id": row.ID})
	return later, err
}

// Stats counts the outbox, the messages held back in it, and the review
// queue.
func (s *Store) Stats(ctx context.Context) (audit.Stats, error) {
	var st audit.Stats
	if err := s.one(ctx, s.db, &st.OutboxDepth, "count outbox", s.q.OutboxCount, nil); err != nil {
		return st, err
	}
	if st.OutboxDepth > 0 {
		var row outboxRow
		err := s.one(ctx, s.db, &row, "read outbox", s.q.OutboxReadOldestPending, nil)
		if err != nil && !isNoRows(err) {
			return st, err
		}
		if !row.CreatedAt.IsZero() {
			st.OutboxOldestAge = s.now().Sub(row.CreatedAt.Time)
		}
		if st.OutboxOldestAge > audit.HeldBackAfter {
			st.HeldBackError = row.LastError
			if err := s.one(ctx, s.db, &st.HeldBack, "count outbox", s.q.OutboxCountHeldBack,
				map[string]any{"before": s.t(s.now().Add(-audit.HeldBackAfter))}); err != nil {
				return st, err
			}
		}
	}
	err := s.one(ctx, s.db, &st.ReviewQueue, "count review queue", s.q.EventCountInReview, map[string]any{"cutoff": s.t(s.reviewCutoff())})
	return st, err
}

// OutboxEvent returns the event an outbox row tells about: the short link of
// a message whose audit URL is too long for Slack names the row.
func (s *Store) OutboxEvent(ctx context.Context, id int64) (audit.EventKey, error) {
	var k audit.EventKey
	err := s.one(ctx, s.db, &k, "read outbox", s.q.OutboxReadEvent, map[string]any{"id": id})
	if isNoRows(err) {
		return k, audit.Errorf(audit.CodeNotFound, "no alert %d about an event", id)
	}
	return k, err
}
