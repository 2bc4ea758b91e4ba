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
	err := s.get(ctx, s.db, &n, "read the unique key", s.q.EventCountUniqueKeys)
	return n > 0, err
}

// DeleteScratch deletes the self-check's events and what it recorded of its
// executions.
func (s *Store) DeleteScratch(ctx context.Context, executionPrefix string) error {
	if !strings.HasPrefix(executionPrefix, audit.ScratchSource+"-") {
		return audit.Errorf(audit.CodeInvalid, "the drill's executions are named %s-…", audit.ScratchSource)
	}
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		arg := map[string]any{"source": audit.ScratchSource, "other": audit.ScratchSource + ".other",
			"executions": executionPrefix + "%"}
		for _, q := range []string{
			s.q.OutboxDeleteScratch,
			s.q.EventDeleteScratch,
			s.q.ErrorDeleteScratch,
			s.q.ExecutionDeleteScratch,
		} {
			if _, err := s.namedExec(ctx, tx, "delete the drill", q, arg); err != nil {
				return err
			}
		}
		return nil
	})
}
