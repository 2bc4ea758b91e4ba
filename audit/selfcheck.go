package audit

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"
)

// ScratchSource is the source of the self-check's drill. Nothing else uses
// it, so its events can be deleted.
const ScratchSource = "retryaudit-check"

// HasUniqueKey reports whether webhook_events has a unique key on exactly
// (source, event_id): without it, two claims of one key could both win.
func (s *Store) HasUniqueKey(ctx context.Context) (bool, error) {
	var n int
	err := s.get(ctx, s.db, &n, "read the unique key", s.d.uniqueKey)
	return n > 0, err
}

// DeleteScratch deletes the self-check's events and what it recorded of its
// executions.
func (s *Store) DeleteScratch(ctx context.Context, executionPrefix string) error {
	if !strings.HasPrefix(executionPrefix, ScratchSource+"-") {
		return errorf(CodeInvalid, "the drill's executions are named %s-…", ScratchSource)
	}
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		arg := map[string]any{"source": ScratchSource, "executions": executionPrefix + "%"}
		for _, q := range []string{
			`DELETE FROM outbox WHERE source = :source`,
			`DELETE FROM webhook_events WHERE source = :source`,
			`DELETE FROM executions WHERE execution_id LIKE :executions`,
		} {
			if _, err := s.namedExec(ctx, tx, "delete the drill", q, arg); err != nil {
				return err
			}
		}
		return nil
	})
}
