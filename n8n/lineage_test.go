package n8n_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

func claim(t *testing.T, s *store.Store, event, execution string) audit.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: execution,
		WorkflowID: "wf1"})
	if err != nil {
		t.Fatalf("claim %s by %s: %v", event, execution, err)
	}
	return res
}

// TestLineage: an execution the service has not seen, presenting a key held
// by another, is looked up in n8n.
func TestLineage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		fake := newFakeN8N(t)
		client := n8n.New(fake.url(), fakeKey, nil)
		client.Timeout = 300 * time.Millisecond
		s := audittest.Open(t, dialect, store.Options{Lookup: client})
		ctx := context.Background()

		t.Run("a Retry of the holder that re-ran the claim is held", func(t *testing.T) {
			claim(t, s, "order-1", "4711")
			fake.add("4720", "retry", "4711", "running")
			res := claim(t, s, "order-1", "4720")
			if res.Decision != audit.DecisionHeld || res.Delivery != audit.DeliveryManualRetry || !res.Process {
				t.Fatalf("claim = %+v", res)
			}
			out, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "order-1",
				Outcome: audit.OutcomeDone, ExecutionID: "4720"})
			if err != nil || out.Message != "done by retry 4720 of 4711" {
				t.Errorf("outcome = %+v, %v", out, err)
			}
		})

		t.Run("a retry of a retry is walked back to the holder", func(t *testing.T) {
			claim(t, s, "order-2", "5000")
			fake.add("5010", "retry", "5000", "error")
			fake.add("5020", "retry", "5010", "running")
			res := claim(t, s, "order-2", "5020")
			if res.Decision != audit.DecisionHeld || res.Delivery != audit.DeliveryManualRetry {
				t.Fatalf("claim = %+v", res)
			}
			x, up, _, err := s.Lineage(ctx, "5020")
			if err != nil || x.Root != "5000" || len(up) != 2 || up[0].ID != "5010" || up[1].ID != "5000" {
				t.Errorf("lineage of 5020: %+v up %+v, %v", x, up, err)
			}
		})

		t.Run("a webhook execution is a redelivery", func(t *testing.T) {
			claim(t, s, "order-3", "6000")
			fake.add("6001", "webhook", "", "running")
			res := claim(t, s, "order-3", "6001")
			if res.Decision != audit.DecisionInProgress || res.Delivery != audit.DeliveryRedelivery ||
				!strings.Contains(res.LineageNote, `mode "webhook"`) {
				t.Errorf("claim = %+v", res)
			}
		})

		t.Run("a retry of another execution is not the holder's", func(t *testing.T) {
			claim(t, s, "order-4", "7000")
			fake.add("7001", "retry", "6999", "running")
			fake.add("6999", "webhook", "", "error")
			if res := claim(t, s, "order-4", "7001"); res.Process {
				t.Errorf("claim = %+v", res)
			}
		})

		t.Run("an execution n8n does not know (pruned) is a redelivery, and the history says why", func(t *testing.T) {
			claim(t, s, "order-5", "8000")
			res := claim(t, s, "order-5", "8001")
			if res.Process || res.Delivery != audit.DeliveryRedelivery || !strings.Contains(res.LineageNote, "not found") {
				t.Fatalf("claim = %+v", res)
			}
			ev, err := s.Event(ctx, "shop", "order-5")
			if err != nil {
				t.Fatal(err)
			}
			last := ev.History[len(ev.History)-1]
			if !strings.Contains(last.Message, "treated as a redelivery") {
				t.Errorf("history line = %+v", last)
			}
		})

		t.Run("a key n8n refuses is a redelivery", func(t *testing.T) {
			bad := n8n.New(fake.url(), "wrong-key", nil)
			s2 := audittest.Open(t, dialect, store.Options{Lookup: bad})
			claim(t, s2, "order-6", "9000")
			res := claim(t, s2, "order-6", "9001")
			if res.Process || !strings.Contains(res.LineageNote, "refused the API key") {
				t.Errorf("claim = %+v", res)
			}
		})

		t.Run("a slow n8n holds up only the claim that waits for it", func(t *testing.T) {
			claim(t, s, "order-7", "9100")
			fake.mu.Lock()
			fake.gate, fake.arrived = make(chan struct{}), make(chan string, 1)
			fake.mu.Unlock()
			defer func() {
				fake.mu.Lock()
				close(fake.gate)
				fake.gate = nil
				fake.mu.Unlock()
			}()
			done := make(chan audit.ClaimResult, 1)
			go func() { done <- claim(t, s, "order-7", "9101") }()
			<-fake.arrived // the lookup is waiting in n8n now
			if res := claim(t, s, "order-8", "9200"); res.Decision != audit.DecisionClaimed {
				t.Errorf("another event while n8n is slow: %+v", res)
			}
			res := <-done
			if res.Process || !strings.Contains(res.LineageNote, "did not answer") {
				t.Errorf("the waiting claim = %+v", res)
			}
		})

		t.Run("lookups are cached", func(t *testing.T) {
			fake.add("9300", "webhook", "", "success")
			for i := 0; i < 3; i++ {
				if _, err := client.Execution(ctx, "9300"); err != nil {
					t.Fatal(err)
				}
			}
			if n := fake.called("/api/v1/executions/9300"); n != 1 {
				t.Errorf("n8n was asked %d times", n)
			}
		})
	})
}
