package store

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// scratch reports whether a source is one of the drill's.
func scratch(source string) bool {
	return source == audit.ScratchSource || source == audit.ScratchSource+".other"
}

// HasUniqueKey reports whether webhook_events has a unique key on exactly
// (source, event_id): without it, two claims of one key could both win.
func (s *Store) HasUniqueKey(ctx context.Context) (bool, error) {
	var n int
	err := s.one(ctx, s.db, &n, "read the unique key", s.q.EventCountUniqueKeys, nil)
	return n > 0, err
}

// DeleteScratch deletes the self-check's events and what it recorded of its
// executions.
func (s *Store) DeleteScratch(ctx context.Context, executionPrefix string) error {
	if !strings.HasPrefix(executionPrefix, audit.ScratchSource+"-") {
		return audit.Errorf(audit.CodeInvalid, "the drill's executions are named %s-…", audit.ScratchSource)
	}
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		op := "delete the drill"
		_, err := s.execEach(ctx, tx, map[string]any{"source": audit.ScratchSource, "other": audit.ScratchSource + ".other",
			"executions": executionPrefix + "%"}, op, s.q.OutboxDeleteScratch, op, s.q.EventDeleteScratch,
			op, s.q.ErrorDeleteScratch, op, s.q.ExecutionDeleteScratch)
		return err
	})
}
