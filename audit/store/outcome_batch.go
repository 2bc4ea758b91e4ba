package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// outcomeInput is one outcome report waiting for a batch, with what n8n
// said of its reporter's lineage before. A report of an event without items
// is queued without it: lineage matters only when another execution holds
// the entry, which the batch finds out for all its reports in one
// statement, and sends the few that need their lineage again once it is
// learned.
type outcomeInput struct {
	req     audit.OutcomeRequest
	lin     lineage
	learned bool
}

type outcomeJob = job[outcomeInput, audit.OutcomeResult]

// prepareOutcome learns a reporter's lineage anew, for a batch that sent it
// back.
func (s *Store) prepareOutcome(ctx context.Context, o outcomeInput) outcomeInput {
	r := o.req
	var items []string
	if r.Item != "" {
		items = []string{r.Item}
	}
	o.lin = s.learnLineage(ctx, lineageKey{Source: r.Source, EventID: r.EventID, Items: items,
		ExecutionID: r.ExecutionID, Failed: true})
	o.learned = true
	return o
}

// outcomeBatch decides a batch of outcome reports in tx, in the order they
// came, each in a savepoint: the batch shares one commit. A report refused
// for what it asks writes nothing (not found, invalid) or only its evidence
// (not the holder), and fails none of its neighbours. A later report of an
// event in the batch goes again after the batch commits, its lineage
// learned anew: the report before may have moved the holder, and what
// lineage says (from n8n's API or from what the service knows) was learned
// against the holder before. A report whose entry's row another session
// holds is set aside, as a claim is (batcher.setAside).
func (s *Store) outcomeBatch(ctx context.Context, tx *sqlx.Tx, jobs []*outcomeJob, now time.Time) error {
	locked, err := lockEntries(ctx, s, tx, jobs, func(o outcomeInput) audit.EventKey {
		return audit.EventKey{Source: o.req.Source, EventID: o.req.EventID}
	}, uniqueColumn(jobs, func(j *outcomeJob) string { return j.req.req.ExecutionID }))
	if err != nil {
		return err
	}
	jobs = s.outcomes.setAside(jobs, func(o outcomeInput) bool { return locked.held[reportKey(o.req)] })
	needs, err := s.reportsNeedingLineage(ctx, tx, jobs, locked)
	if err != nil {
		return err
	}
	known, err := s.knownReporters(ctx, tx, jobs, locked.execs)
	if err != nil {
		return err
	}
	// The plain reports first, set-based; the loop below runs the rest
	// one by one, in the order they came.
	decided, err := s.outcomeRound(ctx, tx, plainReports(jobs, needs), locked.execs, now)
	if err != nil {
		return err
	}
	seen, later := map[audit.EventKey]bool{}, map[audit.EventKey]bool{}
	for _, j := range jobs {
		k := reportKey(j.req.req)
		if decided[j] {
			seen[k] = true
			continue
		}
		// A later report of an event goes again, its lineage learned anew
		// against the holder the reports before it left, unless its
		// lineage cannot depend on the holder: it is whole, or there is
		// none to learn (no n8n API, and n8n never told us of it).
		whole := j.req.learned && j.req.lin.complete || s.lookup == nil && !known[j.req.req.ExecutionID]
		if later[k] || needs[j] || seen[k] && !whole {
			j.again, later[k] = true, true
			continue
		}
		seen[k] = true
		var res audit.OutcomeResult
		var refused error
		var alerted bool
		answer, err := s.alone(ctx, tx, "outcome", func() error {
			var err error
			res, refused, alerted, err = s.reportOutcome(ctx, tx, j.req.req, j.req.lin, now)
			return err
		})
		switch {
		case err != nil:
			return err
		case errors.Is(answer, errAskN8N):
			j.again, later[k] = true, true // its caller asks n8n, then it comes again
		case answer != nil:
			j.err = answer
		default:
			j.res, j.err = res, refused // a refusal kept as evidence is committed
			j.after = s.afterOutcome(j.req.req, res, refused, alerted)
		}
	}
	return nil
}

// knownReporters returns, without n8n's API, the reporters of events
// reported more than once in the batch that the service knows from n8n
// (a mode or a retryOf): their lineage may make them a Retry of the holder
// the report before them leaves.
func (s *Store) knownReporters(ctx context.Context, tx *sqlx.Tx, jobs []*outcomeJob,
	execs map[string]knownExecution) (map[string]bool, error) {
	if s.lookup != nil {
		return nil, nil
	}
	count := map[audit.EventKey]int{}
	for _, j := range jobs {
		count[reportKey(j.req.req)]++
	}
	seen := map[string]bool{}
	var ids []string
	for _, j := range jobs {
		if id := j.req.req.ExecutionID; count[reportKey(j.req.req)] > 1 && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return s.knownOf(ctx, tx, ids, execs)
}

// knownOf returns which of the executions (by n8n id) the service
// knows what n8n said of (a mode or a retryOf): from execs, the lock's read,
// or when that is nil (SQLite) from the database.
func (s *Store) knownOf(ctx context.Context, tx *sqlx.Tx, ids []string, execs map[string]knownExecution) (map[string]bool, error) {
	known := make(map[string]bool, len(ids))
	if execs != nil {
		for _, id := range ids {
			if k, ok := execs[id]; ok && (k.RetryOf != "" || k.Mode != "") {
				known[id] = true
			}
		}
		return known, nil
	}
	var got []string
	if err := s.namedSelect(ctx, tx, &got, "read executions", s.q.ExecutionBatchReadKnown, executionsArg{columnSet("id", ids)}); err != nil {
		return nil, err
	}
	for _, id := range got {
		known[id] = true
	}
	return known, nil
}

func (s *Store) afterOutcome(req audit.OutcomeRequest, res audit.OutcomeResult, refused error, alerted bool) func() {
	return func() {
		s.metrics.Reported(string(req.Outcome), res.Changed && refused == nil)
		if alerted {
			s.nudge()
		}
	}
}

// reportsNeedingLineage returns the reports queued without lineage (the
// first of each event in the batch) whose entry another execution holds, as
// the batch starts, and whose lineage can say something: n8n's API is
// configured, or the service knows the reporter from n8n.
func (s *Store) reportsNeedingLineage(ctx context.Context, tx *sqlx.Tx, jobs []*outcomeJob,
	locked lockedEntries) (map[*outcomeJob]bool, error) {
	seen := map[audit.EventKey]bool{}
	var asked []*outcomeJob
	for _, j := range jobs {
		k := reportKey(j.req.req)
		if !j.req.learned && !seen[k] {
			asked = append(asked, j)
		}
		seen[k] = true
	}
	if len(asked) == 0 {
		return nil, nil
	}
	held := map[audit.EventKey]string{}
	for _, j := range asked {
		k := reportKey(j.req.req)
		st := locked.states[k]
		if (st.Status == audit.StatusProcessing || st.Status == audit.StatusFailed) && st.Holder != "" && st.ItemCount == 0 {
			held[k] = st.Holder
		}
	}
	var others []string
	asked = slices.DeleteFunc(asked, func(j *outcomeJob) bool {
		h := held[reportKey(j.req.req)]
		if h == "" || h == j.req.req.ExecutionID {
			return true
		}
		others = append(others, j.req.req.ExecutionID)
		return false
	})
	if len(asked) == 0 {
		return nil, nil
	}
	known := map[string]bool{}
	if s.lookup == nil {
		var err error
		if known, err = s.knownOf(ctx, tx, others, locked.execs); err != nil {
			return nil, err
		}
	}
	needs := map[*outcomeJob]bool{}
	for _, j := range asked {
		needs[j] = s.lookup != nil || known[j.req.req.ExecutionID]
	}
	return needs, nil
}
