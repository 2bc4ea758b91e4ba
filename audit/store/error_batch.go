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

// errorBatch records a batch of error reports in tx, in the order they
// came: the batch shares one commit. Plain reports (plainErrors) go in
// set-based rounds (errorRound) as far as a round can take them; any other
// goes alone, in a savepoint (errorAlone), and the next round starts after
// it. A report sees what the reports before it wrote: a second identical
// payload in the batch is answered as a duplicate of the first, as it
// would be one by one.
func (s *Store) errorBatch(ctx context.Context, tx *sqlx.Tx, jobs []*errorJob, now time.Time) error {
	plain, err := s.plainErrors(ctx, tx, jobs, now)
	if err != nil {
		return err
	}
	for len(jobs) > 0 {
		n := 0
		for n < len(jobs) && plain[jobs[n]] {
			n++
		}
		if n > 0 {
			round := n
			if n, err = s.errorRound(ctx, tx, jobs[:round], now); err != nil {
				return err
			}
			if n < round {
				plain[jobs[n]] = false // what the round read of it sends it alone
			}
		}
		if n == 0 {
			if err := s.errorAlone(ctx, tx, jobs[0], now); err != nil {
				return err
			}
			n = 1
		}
		jobs = jobs[n:]
	}
	return nil
}

// errorAlone records one report in its savepoint. A report refused for
// what it says writes nothing and fails none of its neighbours.
func (s *Store) errorAlone(ctx context.Context, tx *sqlx.Tx, j *errorJob, now time.Time) error {
	var (
		res     audit.N8NErrorResult
		alerted bool
	)
	answer, err := s.alone(ctx, tx, "error", func() error {
		var err error
		res, alerted, err = s.recordReport(ctx, tx, j.req.rep, j.req.self, now)
		return err
	})
	switch {
	case err != nil:
		return err
	case answer != nil:
		j.err = answer
	default:
		j.res, j.after = res, s.afterError(res, alerted)
	}
	return nil
}

// afterError counts a recorded error and, when it wrote an alert, wakes the
// outbox worker, once the transaction that wrote them committed: an error
// that alerts nobody (of a finished event nobody was alerted about, say)
// costs the worker nothing.
func (s *Store) afterError(res audit.N8NErrorResult, alerted bool) func() {
	return func() {
		if res.Duplicate {
			return
		}
		s.metrics.Ingested(res.Kind)
		if alerted {
			s.nudge()
		}
	}
}
