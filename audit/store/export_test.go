package store

import (
	"context"
	"reflect"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// ClaimTogether runs claims as one batch, in the order given, as the group
// commit would had they arrived together: the model-based test compares it
// with batches of one.
func (s *Store) ClaimTogether(ctx context.Context, reqs []audit.ClaimRequest) ([]audit.ClaimResult, []error) {
	rs := make([]*request, len(reqs))
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		if errs[i] = req.Validate(); errs[i] == nil {
			req = req.Stored(s.redact)
			rs[i] = &request{claim: &req, word: s.askFor(ctx, req.ExecutionID, req.RunStamp, req.Mode, req.RetryOf)}
		}
	}
	answers := together(ctx, s.claims, rs, errs)
	out := make([]audit.ClaimResult, len(reqs))
	for i, a := range answers {
		out[i] = a.claim
	}
	return out, errs
}

// ReportTogether runs outcome reports as one batch, in the order given.
func (s *Store) ReportTogether(ctx context.Context, reqs []audit.OutcomeRequest) ([]audit.OutcomeResult, []error) {
	rs := make([]*request, len(reqs))
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		if errs[i] = req.Validate(); errs[i] == nil {
			rs[i] = &request{outcome: &req, word: s.askFor(ctx, req.ExecutionID, req.RunStamp, req.Mode, "")}
		}
	}
	answers := together(ctx, s.outcomes, rs, errs)
	out := make([]audit.OutcomeResult, len(reqs))
	for i, a := range answers {
		out[i] = a.outcome
		if errs[i] == nil {
			errs[i] = a.refusal
		}
	}
	return out, errs
}

// RecordErrorsTogether records error reports as one batch, in the order
// given.
func (s *Store) RecordErrorsTogether(ctx context.Context, reps []audit.N8NErrorReport) ([]audit.N8NErrorResult, []error) {
	rs := make([]*request, len(reps))
	errs := make([]error, len(reps))
	for i, r := range reps {
		r = r.Stored(s.redact)
		var word *audit.N8NWord
		if r.Kind == audit.N8NErrorExecution && r.ExecutionID != "" {
			word = s.askN8N(ctx, r.ExecutionID)
		}
		rs[i] = &request{report: &r, word: word}
	}
	answers := together(ctx, s.errors, rs, errs)
	out := make([]audit.N8NErrorResult, len(reps))
	for i, a := range answers {
		out[i] = a.report
	}
	return out, errs
}

// together runs the requests given (nil: refused before) as one batch of b.
func together(ctx context.Context, b *batcher[*request, answer], rs []*request, errs []error) []answer {
	var jobs []*ledgerJob
	var at []int
	for i, r := range rs {
		if r == nil {
			continue
		}
		jobs = append(jobs, &ledgerJob{ctx: ctx, req: r, queued: time.Now(), done: make(chan struct{}), seq: b.seq.Add(1)})
		at = append(at, i)
	}
	b.execute(jobs)
	out := make([]answer, len(rs))
	for n, j := range jobs {
		<-j.done
		out[at[n]], errs[at[n]] = j.res, j.err
		if j.err == nil && j.after != nil {
			j.after()
		}
	}
	return out
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
