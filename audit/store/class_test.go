package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// retryLookup says that execution "retry" is a Retry of "first".
type retryLookup struct{}

func (retryLookup) Execution(_ context.Context, id string) (audit.N8NExecution, error) {
	if id == "c5-retry" {
		return audit.N8NExecution{ID: id, Mode: "retry", RetryOf: "c5-first"}, nil
	}
	return audit.N8NExecution{ID: id, Mode: "webhook"}, nil
}

// TestRedeliveryClass: each redelivery says why it happened.
func TestRedeliveryClass(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		clock := audittest.NewClock(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, Lookup: retryLookup{}})
		claim := func(req audit.ClaimRequest) audit.ClaimResult {
			t.Helper()
			req.Source = "shop"
			if req.WorkflowID == "" {
				req.WorkflowID = "wf1"
			}
			res, err := s.Claim(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		cases := []struct {
			name  string
			event string
			first audit.ClaimRequest
			wait  time.Duration
			again audit.ClaimRequest
			fail  bool // the first reports failed before the second claims
			want  audit.Class
		}{
			{"the same delivery id twice 50 ms apart: n8n started twice", "c1",
				audit.ClaimRequest{ExecutionID: "c1-a", DeliveryID: "d-1"}, 50 * time.Millisecond,
				audit.ClaimRequest{ExecutionID: "c1-b", DeliveryID: "d-1"}, false, audit.ClassDoubleStart},
			{"no delivery ids, the same fingerprint 80 ms apart: n8n started twice", "c1b",
				audit.ClaimRequest{ExecutionID: "c1b-a", Fingerprint: "99.00"}, 80 * time.Millisecond,
				audit.ClaimRequest{ExecutionID: "c1b-b", Fingerprint: "99.00"}, false, audit.ClassDoubleStart},
			{"the same delivery id a minute later: the sender retried", "c1c",
				audit.ClaimRequest{ExecutionID: "c1c-a", DeliveryID: "d-9"}, time.Minute,
				audit.ClaimRequest{ExecutionID: "c1c-b", DeliveryID: "d-9"}, false, audit.ClassSenderRetry},
			{"a new delivery id: the sender retried", "c2",
				audit.ClaimRequest{ExecutionID: "c2-a", DeliveryID: "d-2"}, 50 * time.Millisecond,
				audit.ClaimRequest{ExecutionID: "c2-b", DeliveryID: "d-3"}, false, audit.ClassSenderRetry},
			{"another workflow id: parallel workflows", "c3",
				audit.ClaimRequest{ExecutionID: "c3-a", DeliveryID: "d-4"}, 50 * time.Millisecond,
				audit.ClaimRequest{ExecutionID: "c3-b", DeliveryID: "d-4", WorkflowID: "wf-old"}, false, audit.ClassParallelWorkflows},
			{"a capture after failed", "c4",
				audit.ClaimRequest{ExecutionID: "c4-a"}, time.Minute,
				audit.ClaimRequest{ExecutionID: "c4-b"}, true, audit.ClassAfterFailure},
			{"a Retry", "c5",
				audit.ClaimRequest{ExecutionID: "c5-first"}, time.Minute,
				audit.ClaimRequest{ExecutionID: "c5-retry"}, false, audit.ClassManualRetry},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				tc.first.EventID, tc.again.EventID = tc.event, tc.event
				if res := claim(tc.first); res.Class != "" {
					t.Errorf("a first delivery has class %q", res.Class)
				}
				if tc.fail {
					if _, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: tc.event,
						ExecutionID: tc.first.ExecutionID, Outcome: audit.OutcomeFailed}); err != nil {
						t.Fatal(err)
					}
				}
				clock.Advance(tc.wait)
				if res := claim(tc.again); res.Class != tc.want {
					t.Errorf("class = %q, want %q (%+v)", res.Class, tc.want, res)
				}
				if res := claim(tc.again); res.Class != "" || res.Delivery != audit.DeliverySameExecution {
					t.Errorf("a resend: class %q, delivery %s", res.Class, res.Delivery)
				}
				d, err := s.Event(ctx, "shop", tc.event)
				if err != nil {
					t.Fatal(err)
				}
				var got string
				for _, l := range d.History {
					if l.Kind == audit.KindClaim && l.ExecutionID == tc.again.ExecutionID && l.Class != "" {
						got = l.Class
					}
				}
				var stored string
				for _, x := range d.Executions {
					if x.ID == tc.again.ExecutionID {
						stored = string(x.Presence.Class)
					}
				}
				if got != string(tc.want) || stored != string(tc.want) {
					t.Errorf("history says %q, the execution %q, want %q", got, stored, tc.want)
				}
			})
		}
	})
}
