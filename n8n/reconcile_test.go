package n8n_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/n8n"
)

func errorsOf(t *testing.T, s *audit.Store, kind string) map[string]audit.ErrorRecord {
	t.Helper()
	var recs []audit.ErrorRecord
	if err := s.DB().Select(&recs, s.DB().Rebind(`SELECT id, dedupe_key, received_at, kind, execution_id, retry_of,
		root_execution_id, workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload,
		payload_truncated, payload_dropped, source, event_id FROM n8n_errors WHERE kind = ?`), kind); err != nil {
		t.Fatal(err)
	}
	out := map[string]audit.ErrorRecord{}
	for _, r := range recs {
		out[r.ExecutionID] = r
	}
	return out
}

func TestReconcile(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		fake := newFakeN8N(t)
		clock := audittest.NewClock(time.Date(2026, 12, 2, 10, 5, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, audit.Options{Now: clock.Now})
		r := &n8n.Reconciler{Client: n8n.New(fake.url(), fakeKey, nil), Store: s, Log: slog.New(slog.DiscardHandler),
			Owner: "test", Grace: time.Minute, Lease: time.Minute, Now: clock.Now}

		fake.add("10", "webhook", "", "error") // failed before the service watched: not news
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(errorsOf(t, s, audit.ErrorReconcile)); n != 0 {
			t.Fatalf("the first pass recorded %d old failures", n)
		}

		claim(t, s, "order-30", "30")
		fake.add("30", "webhook", "", "error") // no error workflow ran
		fake.add("31", "webhook", "", "error") // the error workflow reported it
		if _, err := s.RecordError(ctx, audit.ErrorReport{Kind: audit.ErrorExecution, DedupeKey: "exec:31",
			ExecutionID: "31", Message: "reported"}); err != nil {
			t.Fatal(err)
		}
		fake.add("32", "retry", "30", "error")
		fake.add("33", "webhook", "", "error")
		fake.mu.Lock()
		fake.executions["33"]["stoppedAt"] = clock.Now().Add(-10 * time.Second).Format(time.RFC3339Nano)
		fake.mu.Unlock()

		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		found := errorsOf(t, s, audit.ErrorReconcile)
		if len(found) != 2 || found["30"].ID == 0 || found["32"].ID == 0 {
			t.Fatalf("found %v, want executions 30 and 32", keys(found))
		}
		if ev, ok := found["30"].Linked(); !ok || ev.EventID != "order-30" {
			t.Errorf("30 is linked to %+v", ev)
		}
		if ev, ok := found["32"].Linked(); !ok || ev.EventID != "order-30" {
			t.Errorf("32 (a retry of 30) is linked to %+v", ev)
		}
		if !strings.Contains(found["30"].Message, "CRM answered 502") || found["30"].Node != "Create CRM order" {
			t.Errorf("30: node %q, message %q", found["30"].Node, found["30"].Message)
		}
		if fake.called("/api/v1/executions/31") != 0 {
			t.Error("an execution the intake reported was looked up again")
		}

		clock.Advance(2 * time.Minute) // 33 is old enough now
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := errorsOf(t, s, audit.ErrorReconcile)["33"]; !ok {
			t.Error("33 was not recorded after its grace")
		}
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(errorsOf(t, s, audit.ErrorReconcile)); n != 3 {
			t.Errorf("%d records after a pass with nothing new, want 3", n)
		}
		var alerts int
		s.DB().Get(&alerts, `SELECT count(*) FROM outbox WHERE kind = 'alert'`)
		if alerts != 3 { // order-30's thread, 31's and 33's (linked to nothing)
			t.Errorf("%d alerts, want 3", alerts)
		}

		t.Run("a refused key fails the pass", func(t *testing.T) {
			bad := *r
			bad.Client = n8n.New(fake.url(), "wrong", nil)
			bad.Owner = "test"
			if err := bad.Run(ctx); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("err = %v", err)
			}
		})

		t.Run("another instance holding the lease skips the pass", func(t *testing.T) {
			other := *r
			other.Owner = "other"
			fake.add("40", "webhook", "", "error")
			clock.Advance(time.Hour)
			if err := r.Run(ctx); err != nil { // renews test's lease
				t.Fatal(err)
			}
			fake.add("41", "webhook", "", "error")
			clock.Advance(2 * time.Minute)
			if held, _ := s.TakeLease(ctx, "reconcile", "test", time.Hour); !held {
				t.Fatal("test could not renew its lease")
			}
			if err := other.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := errorsOf(t, s, audit.ErrorReconcile)["41"]; ok {
				t.Error("a second instance reconciled while the first held the lease")
			}
		})
	})
}

func keys(m map[string]audit.ErrorRecord) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
