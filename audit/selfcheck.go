package audit

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"
)

// ScratchSource is the source of the self-check's drill, and with
// ".other" appended its second source. Nothing else uses them, so their
// events can be deleted, and their alerts are never sent.
const ScratchSource = "retryaudit-check"

// scratch reports whether a source is one of the drill's.
func scratch(source string) bool {
	return source == ScratchSource || source == ScratchSource+".other"
}

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
		arg := map[string]any{"sources": []string{ScratchSource, ScratchSource + ".other"},
			"executions": executionPrefix + "%"}
		for _, q := range []string{
			`DELETE FROM outbox WHERE source IN (:sources)`,
			`DELETE FROM webhook_events WHERE source IN (:sources)`,
			`DELETE FROM n8n_errors WHERE execution_id LIKE :executions`,
			`DELETE FROM executions WHERE execution_id LIKE :executions`,
		} {
			if _, err := s.namedExec(ctx, tx, "delete the drill", q, arg); err != nil {
				return err
			}
		}
		return nil
	})
}
