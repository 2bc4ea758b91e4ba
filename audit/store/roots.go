package store

import (
	"context"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// saveRoot remembers a thread's root in the caller's transaction; the first
// one kept wins.
func (s *Store) saveRoot(ctx context.Context, tx *sqlx.Tx, r audit.ThreadRoot) error {
	_, err := s.namedExec(ctx, tx, "save thread root", s.q.ThreadSave, map[string]any{
		"key": r.Key, "channel": r.Destination, "ts": r.MessageID, "root": r.RowID, "now": s.t(s.now()),
	})
	return err
}

// Root returns a thread's root and the alert its row told; ok is false when
// the thread has none (its first message was never sent, or was sent where
// messages have no threads).
func (s *Store) Root(ctx context.Context, key string) (audit.ThreadRoot, audit.Alert, bool, error) {
	var r audit.ThreadRoot
	err := s.one(ctx, s.db, &r, "read thread root", s.q.ThreadReadRoot, map[string]any{"thread": key})
	if isNoRows(err) {
		return r, audit.Alert{}, false, nil
	}
	if err != nil {
		return r, audit.Alert{}, false, err
	}
	var row outboxRow
	if err := s.one(ctx, s.db, &row, "read thread root", s.q.OutboxReadRootRow, map[string]any{"id": r.RowID}); err != nil {
		return r, audit.Alert{}, false, err
	}
	a, err := row.message().Alert()
	if err != nil {
		return r, audit.Alert{}, false, &audit.Error{Code: audit.CodeInternal, Message: "decode alert", Err: err}
	}
	return r, a, true, nil
}
