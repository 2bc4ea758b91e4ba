package audit

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
)

// outcomeInput is one outcome report waiting for a batch, with what n8n
// said of its reporter's lineage before.
type outcomeInput struct {
	req OutcomeRequest
	lin lineage
}

type outcomeJob = job[outcomeInput, OutcomeResult]

// outcomeBatch decides a batch of outcome reports in tx, in the order they
// came, each in a savepoint: the batch shares one commit. A report refused
// for what it asks writes nothing (not found, invalid) or only its evidence
// (not the holder), and fails none of its neighbours. A later report of an
// event in the batch goes again after the batch commits, its lineage
// learned anew: the report before may have moved the holder, and what
// lineage says (from n8n's API or from what the service knows) was learned
// against the holder before.
func (s *Store) outcomeBatch(ctx context.Context, tx *sqlx.Tx, jobs []*outcomeJob, now time.Time) error {
	seen, later := map[string]bool{}, map[string]bool{}
	for _, j := range jobs {
		k := j.req.req.Source + "\x00" + j.req.req.EventID
		if later[k] || seen[k] {
			j.again, later[k] = true, true
			continue
		}
		seen[k] = true
		if _, err := s.exec(ctx, tx, "outcome", `SAVEPOINT outcome`); err != nil {
			return err
		}
		res, refused, alerted, err := s.reportOutcome(ctx, tx, j.req.req, j.req.lin, now)
		if err != nil {
			if !refusal(err) {
				return err
			}
			j.err = err
			if _, err := s.exec(ctx, tx, "outcome", `ROLLBACK TO SAVEPOINT outcome`); err != nil {
				return err
			}
			continue
		}
		j.res, j.err = res, refused
		j.after = s.afterOutcome(j.req.req, res, refused, alerted)
		if _, err := s.exec(ctx, tx, "outcome", `RELEASE SAVEPOINT outcome`); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) afterOutcome(req OutcomeRequest, res OutcomeResult, refused error, alerted bool) func() {
	return func() {
		s.metrics.reported(req.Outcome, res.Changed && refused == nil)
		if alerted {
			s.nudge()
		}
	}
}
