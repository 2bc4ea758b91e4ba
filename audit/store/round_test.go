package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestOneBatchEveryKindOfClaim: every kind of claim is decided by a batch's
// rounds, a batch of one or many. Claims of every kind arrive in one
// batch: a Retry taking over from the execution it retries, a reclaim of a
// failed entry, a duplicate of a done one, items (one held by another
// execution, one new), a new key twice, and a claim without items of an
// event claimed with them. Each gets the answer it gets alone (checked on
// a second store whose batches are of one), and the Retry's history line
// names the execution it retries.
func TestOneBatchEveryKindOfClaim(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		n8n := retryOf{"r2", "h1"}
		together := audittest.Open(t, dialect, store.Options{Lookup: n8n})
		alone := audittest.Open(t, dialect, store.Options{Lookup: n8n, Batching: store.Batching{Off: true}})
		setUp := func(s *store.Store) {
			t.Helper()
			for _, req := range []audit.ClaimRequest{
				{Source: "shop", EventID: "held", ExecutionID: "h1"},
				{Source: "shop", EventID: "failed", ExecutionID: "f1"},
				{Source: "shop", EventID: "done", ExecutionID: "d1"},
				{Source: "shop", EventID: "items", ExecutionID: "i1", Items: []string{"a"}},
			} {
				if _, err := s.Claim(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range []audit.OutcomeRequest{
				{Source: "shop", EventID: "failed", ExecutionID: "f1", Outcome: audit.OutcomeFailed},
				{Source: "shop", EventID: "done", ExecutionID: "d1", Outcome: audit.OutcomeDone},
			} {
				if _, err := s.ReportOutcome(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}
		setUp(together)
		setUp(alone)
		reqs := []audit.ClaimRequest{
			{Source: "shop", EventID: "held", ExecutionID: "r2"},
			{Source: "shop", EventID: "failed", ExecutionID: "f2"},
			{Source: "shop", EventID: "done", ExecutionID: "d2"},
			{Source: "shop", EventID: "items", ExecutionID: "i2", Items: []string{"a", "b"}},
			{Source: "shop", EventID: "new", ExecutionID: "n1"},
			{Source: "shop", EventID: "new", ExecutionID: "n2"},
			{Source: "shop", EventID: "items", ExecutionID: "i3"},
		}
		want := []string{
			"held processing r2 manual_retry [] <nil>",
			"reclaimed processing f2 redelivery [] <nil>",
			"duplicate done d1 redelivery [] <nil>",
			"claimed processing i2 redelivery [a:in_progress b:claimed] <nil>",
			"claimed processing n1 first_delivery [] <nil>",
			"in_progress processing n1 redelivery [] <nil>",
		}
		res, errs := together.ClaimTogether(ctx, reqs)
		for i, req := range reqs {
			got := claimLine(res[i], errs[i])
			one, err := alone.Claim(ctx, req)
			if one := claimLine(one, err); got != one {
				t.Errorf("claim %d (%s by %s): in the batch %s, alone %s", i, req.EventID, req.ExecutionID, got, one)
			}
			switch {
			case i < len(want) && got != want[i]:
				t.Errorf("claim %d (%s by %s): %s, want %s", i, req.EventID, req.ExecutionID, got, want[i])
			case i == len(want) && audit.ErrorCode(errs[i]) != audit.CodeConflict:
				t.Errorf("claim %d (%s without items): %s, want a conflict", i, req.EventID, got)
			}
		}
		d, err := together.Event(ctx, "shop", "held")
		if err != nil {
			t.Fatal(err)
		}
		last := d.History[len(d.History)-1]
		if last.ExecutionID != "r2" || last.RetryOf != "h1" || last.Message != "retry of h1: takes over the claim; n8n: execution r2 is a retry of the holder h1" {
			t.Errorf("the Retry's history line: %+v", last)
		}
	})
}

// claimLine is a claim's answer in a line: decision, status, holder,
// delivery, items, error.
func claimLine(r audit.ClaimResult, err error) string {
	items := []string{}
	for _, it := range r.Items {
		items = append(items, fmt.Sprintf("%s:%s", it.Item, it.Decision))
	}
	return fmt.Sprintf("%s %s %s %s %v %v", r.Decision, r.Status, r.HolderExecutionID, r.Delivery, items, err)
}

// TestReportsAloneWriteAsTheRound: a report the batch runs alone (an
// item's, a Retry's, an unknown) is moved and written by the round's
// statements, and its history line keeps what only it has: the item, the
// execution it retries.
func TestReportsAloneWriteAsTheRound(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := audittest.Open(t, dialect, store.Options{Lookup: retryOf{"r2", "h1"}})
		for _, req := range []audit.ClaimRequest{
			{Source: "shop", EventID: "items", ExecutionID: "i1", Items: []string{"a"}},
			{Source: "shop", EventID: "retried", ExecutionID: "h1"},
			{Source: "shop", EventID: "unknown", ExecutionID: "u1"},
		} {
			if _, err := s.Claim(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			report                         audit.OutcomeRequest
			status, item, retryOf, message string
		}{
			{audit.OutcomeRequest{Source: "shop", EventID: "items", Item: "a", ExecutionID: "i1", Outcome: audit.OutcomeDone},
				"done", "a", "", "done by i1"},
			{audit.OutcomeRequest{Source: "shop", EventID: "retried", ExecutionID: "r2", Outcome: audit.OutcomeDone},
				"done", "", "h1", "done by retry r2 of h1 (n8n: execution r2 is a retry of the holder h1)"},
			{audit.OutcomeRequest{Source: "shop", EventID: "unknown", ExecutionID: "u1", Outcome: audit.OutcomeUnknown},
				"processing", "", "", "unknown by u1"},
		} {
			r := c.report
			res, err := s.ReportOutcome(ctx, r)
			if err != nil || !res.Changed || string(res.Status) != c.status {
				t.Errorf("%s by %s: %+v (%v), want %s", r.Outcome, r.ExecutionID, res, err, c.status)
				continue
			}
			d, err := s.Event(ctx, "shop", r.EventID)
			if err != nil {
				t.Fatal(err)
			}
			var line *audit.HistoryLine
			for i := range d.History {
				if d.History[i].Kind == audit.KindOutcome {
					line = &d.History[i]
				}
			}
			if line == nil || line.Item != c.item || line.RetryOf != c.retryOf || line.Message != c.message ||
				line.ExecutionID != r.ExecutionID {
				t.Errorf("%s by %s: history line %+v, want item %q, retry of %q, %q", r.Outcome, r.ExecutionID, line,
					c.item, c.retryOf, c.message)
			}
		}
		if d, _ := s.Event(ctx, "shop", "unknown"); d.ReviewReason != "unknown" {
			t.Errorf("the unknown outcome left review reason %q", d.ReviewReason)
		}
	})
}
