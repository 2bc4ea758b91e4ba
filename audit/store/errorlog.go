package store

import (
	"context"

	"github.com/retryaudit/retryaudit/audit"
)

// KnownError reports whether an error with this dedupe key is recorded
// (for an execution: "exec:" and its id).
func (s *Store) KnownError(ctx context.Context, dedupeKey string) (bool, error) {
	var known bool
	err := s.one(ctx, s.db, &known, "read error", s.q.ErrorKnown, map[string]any{"dedupe_key": dedupeKey})
	return known, err
}

// Error returns one error record with its payload.
func (s *Store) Error(ctx context.Context, id int64) (audit.N8NErrorRecord, error) {
	var row errorRow
	err := s.one(ctx, s.db, &row, "read error", s.q.ErrorRead, map[string]any{"id": id})
	if isNoRows(err) {
		return audit.N8NErrorRecord{}, audit.Errorf(audit.CodeNotFound, "no error %d", id)
	}
	return row.record(), err
}

// Errors lists error records, newest first, and returns the cursor of the
// next page (0 on the last).
func (s *Store) Errors(ctx context.Context, f audit.N8NErrorFilter) ([]audit.N8NErrorRecord, int64, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	before := f.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	recs, err := selectAs(ctx, s, s.db, "list errors", s.q.ErrorList,
		map[string]any{"before": before, "kind": f.Kind, "limit": f.Limit + 1}, errorRow.record)
	if err != nil || len(recs) <= f.Limit {
		return recs, 0, err
	}
	return recs[:f.Limit], recs[f.Limit-1].ID, nil
}

// ErrorCounts returns how many errors of each kind are recorded.
func (s *Store) ErrorCounts(ctx context.Context) (map[string]int, error) {
	counts, _, err := s.kindCounts(ctx, s.db, "count errors", s.q.ErrorCount, nil)
	return counts, err
}

// ExecutionErrors returns the errors of one execution.
func (s *Store) ExecutionErrors(ctx context.Context, id string) ([]audit.N8NErrorRecord, error) {
	return selectAs(ctx, s, s.db, "read errors", s.q.ErrorListOfExecution, map[string]any{"execution_id": id},
		errorRow.record)
}
