package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// errorInput is one error report waiting for a batch, with what n8n said of
// its execution, asked before, outside any transaction.
type errorInput struct {
	rep  audit.N8NErrorReport
	self n8nWord
}

type errorJob = job[errorInput, audit.N8NErrorResult]

// errorBatch records a batch of error reports in tx, in the order they came,
// each in a savepoint: the batch shares one commit. A report refused for
// what it says writes nothing and fails none of its neighbours. A report
// sees what the reports before it wrote: a second identical payload in the
// batch is answered as a duplicate of the first, as it would be one by one.
func (s *Store) errorBatch(ctx context.Context, tx *sqlx.Tx, jobs []*errorJob, now time.Time) error {
	for _, j := range jobs {
		if _, err := s.exec(ctx, tx, "error", s.q.ErrorSavepoint); err != nil {
			return err
		}
		res, err := s.recordReport(ctx, tx, j.req.rep, j.req.self, now)
		if err != nil {
			if !refusal(err) {
				return err
			}
			j.err = err
			if _, err := s.exec(ctx, tx, "error", s.q.ErrorRollback); err != nil {
				return err
			}
			continue
		}
		j.res = res
		j.after = s.afterError(res)
		if _, err := s.exec(ctx, tx, "error", s.q.ErrorRelease); err != nil {
			return err
		}
	}
	return nil
}

// afterError counts a recorded error and wakes the outbox worker for its
// alert, once the transaction that wrote them committed.
func (s *Store) afterError(res audit.N8NErrorResult) func() {
	return func() {
		if res.Duplicate {
			return
		}
		s.metrics.Ingested(res.Kind)
		if res.Kind != audit.N8NErrorTest {
			s.nudge()
		}
	}
}
