package store

import (
	"context"
	"reflect"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// ClaimTogether runs claims as one batch, in the order given, as the group
// commit would had they arrived together: the model-based test compares it
// with the one-by-one path.
func (s *Store) ClaimTogether(ctx context.Context, reqs []audit.ClaimRequest) ([]audit.ClaimResult, []error) {
	res, errs := make([]audit.ClaimResult, len(reqs)), make([]error, len(reqs))
	var jobs []*claimJob
	var at []int
	for i, req := range reqs {
		if errs[i] = req.Validate(); errs[i] != nil {
			continue
		}
		j := &claimJob{ctx: ctx, req: s.claimInput(ctx, req.Stored(s.redact)), queued: time.Now(), done: make(chan struct{})}
		jobs, at = append(jobs, j), append(at, i)
	}
	together(ctx, s.claims, jobs, func(n int, j *claimJob) { res[at[n]], errs[at[n]] = j.res, j.err })
	return res, errs
}

// together runs jobs as one batch, then what it sent back, prepared anew,
// as the next batch, in the order given, as the requests' callers would.
func together[Req, Res any](ctx context.Context, b *batcher[Req, Res], jobs []*job[Req, Res], answer func(int, *job[Req, Res])) {
	at := make([]int, len(jobs))
	for i := range at {
		at[i] = i
	}
	for round := 0; len(jobs) > 0; round++ {
		for _, j := range jobs {
			if j.seq == 0 {
				j.seq = b.seq.Add(1)
			}
		}
		b.execute(jobs)
		var again []*job[Req, Res]
		var againAt []int
		for n, j := range jobs {
			<-j.done
			if j.again && round < maxRounds {
				again = append(again, &job[Req, Res]{ctx: ctx, req: b.prepare(ctx, j.req), queued: time.Now(),
					done: make(chan struct{})})
				againAt = append(againAt, at[n])
				continue
			}
			answer(at[n], j)
			if j.err == nil && j.after != nil {
				j.after()
			}
		}
		jobs, at = again, againAt
	}
}

// ReportTogether runs outcome reports of events without items as one batch,
// in the order given, as the group commit would had they arrived together.
func (s *Store) ReportTogether(ctx context.Context, reqs []audit.OutcomeRequest) ([]audit.OutcomeResult, []error) {
	res, errs := make([]audit.OutcomeResult, len(reqs)), make([]error, len(reqs))
	var jobs []*outcomeJob
	var at []int
	for i, req := range reqs {
		if errs[i] = req.Validate(); errs[i] != nil {
			continue
		}
		j := &outcomeJob{ctx: ctx, req: outcomeInput{req: req}, queued: time.Now(), done: make(chan struct{})}
		jobs, at = append(jobs, j), append(at, i)
	}
	together(ctx, s.outcomes, jobs, func(n int, j *outcomeJob) { res[at[n]], errs[at[n]] = j.res, j.err })
	return res, errs
}

// RecordErrorsTogether records error reports as one batch, in the order
// given, as the group commit would had they arrived together.
func (s *Store) RecordErrorsTogether(ctx context.Context, reps []audit.N8NErrorReport) ([]audit.N8NErrorResult, []error) {
	res, errs := make([]audit.N8NErrorResult, len(reps)), make([]error, len(reps))
	jobs := make([]*errorJob, len(reps))
	for i, r := range reps {
		jobs[i] = &errorJob{ctx: ctx, req: s.errorInput(ctx, r), queued: time.Now(), done: make(chan struct{})}
	}
	together(ctx, s.errors, jobs, func(n int, j *errorJob) { res[n], errs[n] = j.res, j.err })
	return res, errs
}

// Statements returns the store's statements by name, as loaded for its
// database.
func (s *Store) Statements() map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(s.q)
	for i := 0; i < v.NumField(); i++ {
		out[v.Type().Field(i).Name] = v.Field(i).String()
	}
	return out
}

// CaptureAs runs one step of a round's capture of reqs (PostgreSQL's
// EventBatchCapture), each claim routed as a batch would route it whose lock
// found the entries of was in the status given (holder none) and none
// other, and commits. It returns the events whose claim the step decided;
// the rest would take another step.
func (s *Store) CaptureAs(ctx context.Context, reqs []audit.ClaimRequest, was map[audit.EventKey]audit.Status) ([]audit.EventKey, error) {
	claims := make([]*roundClaim, len(reqs))
	step := map[*roundClaim]string{}
	for i, r := range reqs {
		claims[i] = &roundClaim{claimJob: &claimJob{ctx: ctx, req: claimInput{req: r}}, id: r.ExecutionID,
			chain: []string{r.ExecutionID}}
		st, exists := was[eventKey(r)]
		step[claims[i]] = stepFor(entryState{Status: st}, exists, claims[i].chain)
	}
	var got []audit.EventKey
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		entries, err := s.captureStep(ctx, tx, claims, step, time.Now())
		for _, c := range claims {
			if e, ok := entries[c.key()]; ok && e.ItemCount == 0 && decided(step[c], e.entryState, c.chain) != "" {
				got = append(got, c.key())
			}
		}
		return err
	})
	return got, err
}
