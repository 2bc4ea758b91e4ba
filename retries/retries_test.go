package retries_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/retries"
)

// bench is a ledger and a fake n8n, with n8n's API the ledger asks (so a
// Retry's report is known as a Retry of the holder) and the retrier uses.
type bench struct {
	st   *store.Store
	n8n  *fakeN8N
	r    *retries.Retrier
	next int
}

func newBench(t *testing.T, dialect string, cfg retries.Config) *bench {
	f := newFakeN8N(t)
	client := n8n.New(f.URL+"/api/v1", "key", nil)
	st := audittest.Open(t, dialect, store.Options{Lookup: client})
	cfg.Store, cfg.N8N = st, client
	b := &bench{st: st, n8n: f, r: retries.New(cfg), next: 40}
	// A Retry runs the failed node again: the CRM now answers, the order is
	// created, the Retry reports done.
	f.onRetry = func(newID, _ string) string { return "success" }
	return b
}

// reportAs makes the Retry report an outcome for an event.
func (b *bench) reportAs(t *testing.T, source, id string) func(newID, of string) string {
	return func(newID, _ string) string {
		if _, err := b.st.ReportOutcome(context.Background(), audit.OutcomeRequest{Source: source, EventID: id,
			Outcome: audit.OutcomeDone, ExecutionID: newID, WorkflowID: "wf", CRMRef: "CRM-" + newID}); err != nil {
			t.Errorf("the Retry's report: %v", err)
		}
		return "success"
	}
}

// entry makes an event in a status: failed (its holder reported failed,
// then n8n failed the execution), processing, done or cancelled.
func (b *bench) entry(t *testing.T, id string, status audit.Status) (holder string, version int64) {
	t.Helper()
	ctx := context.Background()
	b.next++
	holder = fmt.Sprint(b.next)
	b.n8n.set(holder, "running", "")
	if _, err := b.st.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: id, ExecutionID: holder, WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	switch status {
	case audit.StatusFailed, audit.StatusDone:
		if _, err := b.st.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: id, Outcome: audit.Outcome(status),
			ExecutionID: holder, WorkflowID: "wf", Reason: "the CRM refused"}); err != nil {
			t.Fatal(err)
		}
	case audit.StatusCancelled:
		if _, err := b.st.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: id, To: audit.StatusCancelled,
			Actor: "ann", Note: "test order", Version: b.version(t, id), Confirmed: true}); err != nil {
			t.Fatal(err)
		}
	}
	b.n8n.set(holder, map[audit.Status]string{audit.StatusFailed: "error", audit.StatusDone: "success",
		audit.StatusCancelled: "error", audit.StatusProcessing: "running"}[status], "")
	return holder, b.version(t, id)
}

func (b *bench) version(t *testing.T, id string) int64 {
	t.Helper()
	d, err := b.st.Event(context.Background(), "shop", id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Version
}

func (b *bench) event(t *testing.T, id string) audit.EventDetail {
	t.Helper()
	d, err := b.st.Event(context.Background(), "shop", id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func key(id string) audit.EntryKey { return audit.EntryKey{Source: "shop", EventID: id} }

var bob = retries.Who{Name: "bob", Via: "api"}

func refusal(t *testing.T, err error, reason string) *retries.Refusal {
	t.Helper()
	var rf *retries.Refusal
	if !errors.As(err, &rf) || rf.Reason != reason {
		t.Fatalf("got %v, want a refusal %q", err, reason)
	}
	return rf
}

func TestOne(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		t.Run("a failed entry is retried once, recorded first, and the Retry's report settles it", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			holder, v := b.entry(t, "e1", audit.StatusFailed)
			b.n8n.onRetry = b.reportAs(t, "shop", "e1")
			res, err := b.r.One(ctx, key("e1"), v, bob)
			if err != nil {
				t.Fatal(err)
			}
			if res.State != "succeeded" || res.ExecutionID != holder || res.NewExecutionID == "" {
				t.Errorf("result %+v", res)
			}
			if n := b.n8n.retried(holder); n != 1 {
				t.Errorf("n8n was asked %d times to retry %s, want once", n, holder)
			}
			d := b.event(t, "e1")
			if d.Status != audit.StatusDone {
				t.Errorf("after the Retry's report the entry is %s, want done", d.Status)
			}
			var line *audit.HistoryLine
			for i, h := range d.History {
				if h.Kind == audit.KindRetry {
					line = &d.History[i]
				}
			}
			if line == nil || line.Actor != "bob" || line.ExecutionID != holder || !strings.Contains(line.Message, "via api") {
				t.Errorf("the history's retry line is %+v", line)
			}
			// The same form again: the version moved, nothing is sent.
			_, err = b.r.One(ctx, key("e1"), v, bob)
			refusal(t, err, retries.ReasonChanged)
			if n := b.n8n.totalRetries(); n != 1 {
				t.Errorf("n8n was asked %d times, want once", n)
			}
		})
		t.Run("processing, done and cancelled entries are refused and never sent", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			for _, s := range []audit.Status{audit.StatusProcessing, audit.StatusDone, audit.StatusCancelled} {
				_, v := b.entry(t, "e-"+string(s), s)
				_, err := b.r.One(ctx, key("e-"+string(s)), v, bob)
				rf := refusal(t, err, retries.ReasonNotFailed)
				if rf.Status != s || !strings.Contains(rf.Message, string(s)) {
					t.Errorf("%s: refused with %+v", s, rf)
				}
			}
			if n := b.n8n.totalRetries(); n != 0 {
				t.Errorf("n8n was asked to retry %d times", n)
			}
		})
		t.Run("a stale version is refused naming the current state", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			_, v := b.entry(t, "e2", audit.StatusFailed)
			_, err := b.r.One(ctx, key("e2"), v-1, bob)
			rf := refusal(t, err, retries.ReasonChanged)
			if rf.Version != v || !strings.Contains(rf.Message, "failed") {
				t.Errorf("refusal %+v", rf)
			}
			if b.n8n.totalRetries() != 0 {
				t.Error("a stale retry was sent")
			}
		})
		t.Run("an execution n8n pruned (404) is said to be pruned", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			holder, v := b.entry(t, "e3", audit.StatusFailed)
			b.n8n.prune(holder)
			_, err := b.r.One(ctx, key("e3"), v, bob)
			if rf := refusal(t, err, retries.ReasonPruned); !strings.Contains(rf.Message, "pruned") {
				t.Errorf("refusal %+v", rf)
			}
			if b.version(t, "e3") != v {
				t.Error("a refused retry moved the entry")
			}
		})
		t.Run("an execution that did not fail is no failed execution; n8n's 409 refuses the send", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			holder, v := b.entry(t, "e4", audit.StatusFailed)
			b.n8n.set(holder, "success", "")
			_, err := b.r.One(ctx, key("e4"), v, bob)
			refusal(t, err, retries.ReasonNoFailed)

			// n8n changes its mind between the look and the send: its 409.
			holder5, v5 := b.entry(t, "e5", audit.StatusFailed)
			b.n8n.onRetry = nil
			b.n8n.mu.Lock()
			b.n8n.execs[holder5]["status"] = "error"
			b.n8n.mu.Unlock()
			_ = holder5
			res, err := b.r.One(ctx, key("e5"), v5, bob)
			if err != nil || res.State != "succeeded" {
				t.Fatalf("%+v %v", res, err)
			}
			// A second retry of the same execution: n8n answers 409.
			b.n8n.set(holder5, "success", "")
			_, err = b.r.One(ctx, key("e5"), b.version(t, "e5"), bob)
			refusal(t, err, retries.ReasonNoFailed)
		})
		t.Run("a second retry while one waits for its outcome is refused", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			_, v := b.entry(t, "e6", audit.StatusFailed)
			b.n8n.hold = make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := b.r.One(ctx, key("e6"), v, bob)
				done <- err
			}()
			deadline := time.Now().Add(10 * time.Second)
			for b.n8n.totalRetries() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			_, err := b.r.One(ctx, key("e6"), b.version(t, "e6"), retries.Who{Name: "carol", Via: "page"})
			if rf := refusal(t, err, retries.ReasonPending); !strings.Contains(rf.Message, "by bob") {
				t.Errorf("refusal %+v", rf)
			}
			b.n8n.mu.Lock()
			close(b.n8n.hold)
			b.n8n.hold = nil
			b.n8n.mu.Unlock()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := b.n8n.totalRetries(); n != 1 {
				t.Errorf("n8n was asked %d times", n)
			}
		})
		t.Run("an item of an event with items is retried by its own version; the event alone is refused", func(t *testing.T) {
			b := newBench(t, dialect, retries.Config{})
			ctx := context.Background()
			b.n8n.set("77", "running", "")
			if _, err := b.st.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "m1", ExecutionID: "77", WorkflowID: "wf",
				Items: []string{"a", "b"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.st.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "m1", Item: "a",
				Outcome: audit.OutcomeFailed, ExecutionID: "77", WorkflowID: "wf"}); err != nil {
				t.Fatal(err)
			}
			b.n8n.set("77", "error", "")
			_, err := b.r.One(ctx, key("m1"), b.version(t, "m1"), bob)
			refusal(t, err, retries.ReasonItems)
			var v int64
			for _, it := range b.event(t, "m1").Items {
				if it.Item == "a" {
					v = it.Version
				}
			}
			b.n8n.onRetry = func(newID, _ string) string {
				if _, err := b.st.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "m1", Item: "a",
					Outcome: audit.OutcomeDone, ExecutionID: newID, WorkflowID: "wf"}); err != nil {
					t.Errorf("the Retry's report: %v", err)
				}
				return "success"
			}
			res, err := b.r.One(ctx, audit.EntryKey{Source: "shop", EventID: "m1", Item: "a"}, v, bob)
			if err != nil || res.State != "succeeded" {
				t.Fatalf("%+v %v", res, err)
			}
			for _, it := range b.event(t, "m1").Items {
				if it.Item == "a" && it.Status != audit.StatusDone {
					t.Errorf("item a is %s after its retry", it.Status)
				}
			}
		})
	})
}
