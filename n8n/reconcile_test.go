package n8n_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/metrics"
	"github.com/retryaudit/retryaudit/n8n"
)

func errorsOf(t *testing.T, s *store.Store, kind string) map[string]audit.N8NErrorRecord {
	t.Helper()
	list, _, err := s.Errors(context.Background(), audit.N8NErrorFilter{Kind: kind, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	var recs []audit.N8NErrorRecord
	for _, e := range list {
		whole, err := s.Error(context.Background(), e.ID) // with its payload
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, whole)
	}
	out := map[string]audit.N8NErrorRecord{}
	for _, r := range recs {
		out[r.ExecutionID] = r
	}
	return out
}

// reconcileEnv is a store, a fake n8n, a clock and a reconciler of them.
type reconcileEnv struct {
	s       *store.Store
	fake    *fakeN8N
	clock   *audittest.Clock
	r       *n8n.Reconciler
	metrics *metrics.Metrics
}

// t0 is when the service first reconciles in these tests.
var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func newReconcileEnv(t *testing.T, dialect string) *reconcileEnv {
	t.Helper()
	e := &reconcileEnv{fake: newFakeN8N(t), clock: audittest.NewClock(t0), metrics: metrics.New()}
	e.s = audittest.Open(t, dialect, store.Options{Now: e.clock.Now})
	e.r = &n8n.Reconciler{Client: n8n.New(e.fake.url(), fakeKey, nil), Store: e.s, Log: slog.New(slog.DiscardHandler),
		Metrics: e.metrics, Grace: time.Minute, Lookback: time.Hour, Now: e.clock.Now}
	return e
}

func (e *reconcileEnv) pass(t *testing.T) {
	t.Helper()
	if err := e.r.Run(context.Background()); err != nil {
		t.Fatalf("pass at %s: %v", e.clock.Now().Format("15:04:05"), err)
	}
}

// skipped reads retryaudit_reconcile_skipped_total{reason}.
func (e *reconcileEnv) skipped(t *testing.T, reason string) float64 {
	t.Helper()
	families, err := e.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "retryaudit_reconcile_skipped_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestReconcile(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()

		t.Run("the first pass records nothing that failed before it", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.fake.addRun("10", "webhook", "", "error", t0.Add(-time.Hour), time.Second)
			e.fake.addRun("11", "webhook", "", "error", t0.Add(-90*time.Second), time.Second)
			e.fake.addRun("12", "webhook", "", "error", t0.Add(-30*time.Second), time.Second) // within its grace
			e.pass(t)
			e.clock.Advance(5 * time.Minute)
			e.pass(t)
			found := errorsOf(t, e.s, audit.N8NErrorReconcile)
			if len(found) != 1 || found["12"].ID == 0 {
				t.Fatalf("recorded %v, want only 12, which was still within its grace when reconciliation started",
					keys(found))
			}
		})

		t.Run("a failure is recorded after its grace, once, linked and alerted", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t) // starts watching at t0 - grace
			claim(t, e.s, "order-30", "30")
			e.fake.addRun("30", "webhook", "", "error", t0.Add(10*time.Second), 20*time.Second) // no error workflow ran
			e.fake.addRun("31", "webhook", "", "error", t0.Add(10*time.Second), 20*time.Second) // the intake has it
			if _, err := e.s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:31",
				ExecutionID: "31", Message: "reported"}); err != nil {
				t.Fatal(err)
			}
			e.fake.addRun("32", "retry", "30", "error", t0.Add(40*time.Second), 10*time.Second)
			e.clock.Advance(70 * time.Second) // 30 stopped 40 s ago: within its grace
			e.pass(t)
			if n := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); n != 0 {
				t.Fatalf("recorded %d failures within their grace", n)
			}
			e.clock.Advance(time.Minute)
			e.pass(t)
			found := errorsOf(t, e.s, audit.N8NErrorReconcile)
			if len(found) != 2 || found["30"].ID == 0 || found["32"].ID == 0 {
				t.Fatalf("found %v, want executions 30 and 32", keys(found))
			}
			for _, id := range []string{"30", "32"} {
				if ev, ok := found[id].Linked(); !ok || ev.EventID != "order-30" {
					t.Errorf("%s (30 or a retry of it) is linked to %+v", id, ev)
				}
			}
			if want := "CRM answered 502 for execution 30: Bad gateway"; !strings.Contains(found["30"].Message, want) ||
				found["30"].Node != "Create CRM order" {
				t.Errorf("30: node %q, message %q, want n8n's message and description %q", found["30"].Node,
					found["30"].Message, want)
			}
			if e.fake.called("/api/v1/executions/31") != 0 {
				t.Error("an execution the intake reported was looked up again")
			}
			for range 3 { // the windows overlap: 30 and 32 are read again
				e.clock.Advance(time.Minute)
				e.pass(t)
			}
			if n := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); n != 2 {
				t.Errorf("%d records after passes with nothing new, want 2", n)
			}
			var alerts int
			e.s.DB().Get(&alerts, `SELECT count(*) FROM outbox WHERE kind = 'alert'`)
			if alerts != 2 { // order-30's thread, and 31 (linked to nothing)
				t.Errorf("%d alerts, want 2", alerts)
			}
		})

		for _, byStop := range []bool{false, true} {
			order := map[bool]string{false: "by id, as n8n lists them", true: "by stop time"}[byStop]
			t.Run("a long run that fails after a newer one was reconciled is recorded, listed "+order, func(t *testing.T) {
				e := newReconcileEnv(t, dialect)
				e.fake.byStop = byStop
				e.pass(t)
				// 40 starts first and runs for 20 minutes; 41 starts later
				// and fails at once. Reconciling by the last id seen (41)
				// never records 40.
				e.fake.addRun("40", "webhook", "", "running", t0.Add(time.Second), 0)
				e.fake.addRun("41", "webhook", "", "error", t0.Add(2*time.Second), time.Second)
				for range 5 {
					e.clock.Advance(time.Minute)
					e.pass(t)
				}
				if _, ok := errorsOf(t, e.s, audit.N8NErrorReconcile)["41"]; !ok {
					t.Fatal("41 was not recorded")
				}
				e.fake.addRun("40", "webhook", "", "error", t0.Add(time.Second), 20*time.Minute)
				for range 17 {
					e.clock.Advance(time.Minute)
					e.pass(t)
				}
				if _, ok := errorsOf(t, e.s, audit.N8NErrorReconcile)["40"]; !ok {
					t.Fatal("the long run 40, failed after 41 was reconciled, was never recorded")
				}
			})
		}

		t.Run("a pass pages through every failure in its window", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t)
			const n = 60 // 30 pages of 2: more than the 20 pages a pass used to read
			for i := range n {
				e.fake.addRun(fmt.Sprint(100+i), "webhook", "", "error", t0.Add(time.Duration(i)*time.Second), time.Second)
			}
			e.clock.Advance(3 * time.Minute)
			e.pass(t)
			if got := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); got != n {
				t.Errorf("recorded %d of %d failures", got, n)
			}
		})

		t.Run("paging stops where nothing later can be in the window", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			for i := range 40 { // failed two hours before the service watched, for an hour of lookback
				e.fake.addRun(fmt.Sprint(200+i), "webhook", "", "error", t0.Add(-2*time.Hour), time.Second)
			}
			e.pass(t)
			e.fake.addRun("300", "webhook", "", "error", t0.Add(time.Second), time.Second)
			e.clock.Advance(3 * time.Minute)
			before := e.fake.pages
			e.pass(t)
			if got := e.fake.pages - before; got > 2 {
				t.Errorf("the pass read %d pages; the second holds only failures from before the lookback", got)
			}
			if _, ok := errorsOf(t, e.s, audit.N8NErrorReconcile)["300"]; !ok {
				t.Error("300 was not recorded")
			}
		})

		t.Run("a page that cannot be read is counted and read by the next pass", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t)
			for i := range 6 {
				e.fake.addRun(fmt.Sprint(400+i), "webhook", "", "error", t0.Add(time.Duration(i)*time.Second), time.Second)
			}
			e.fake.failPage = 2
			e.clock.Advance(3 * time.Minute)
			if err := e.r.Run(ctx); err == nil {
				t.Fatal("a pass with an unreadable page reported no error")
			}
			if got := e.skipped(t, "page_unreadable"); got != 1 {
				t.Errorf("retryaudit_reconcile_skipped_total{reason=page_unreadable} = %v, want 1", got)
			}
			if got := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); got != 2 {
				t.Errorf("the first page's %d failures recorded, want 2", got)
			}
			e.clock.Advance(time.Minute)
			e.pass(t)
			if got := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); got != 6 {
				t.Errorf("%d of 6 failures recorded after the next pass", got)
			}
		})

		t.Run("a payload arriving after its reconcile record fills it in", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t)
			claim(t, e.s, "order-50", "50")
			e.fake.addRun("50", "webhook", "", "error", t0.Add(time.Second), time.Second)
			e.clock.Advance(3 * time.Minute)
			e.pass(t)
			before := errorsOf(t, e.s, audit.N8NErrorReconcile)["50"]
			if before.Payload != "" || before.URL != "" {
				t.Fatalf("the reconcile record has a payload or url: %+v", before)
			}
			res := intake(t, e.s, `{"execution":{"id":"50","url":"http://n8n.test/workflow/wf1/executions/50",
				"mode":"webhook","lastNodeExecuted":"Create CRM order","error":{"message":"CRM answered 502 for execution 50",
				"description":"Bad gateway","httpCode":"502","stack":"NodeApiError: at line 3","node":{"name":"Create CRM order"}}},
				"workflow":{"id":"wf1","name":"Orders to CRM"}}`)
			if !res.Duplicate || res.Linked == nil || res.Linked.EventID != "order-50" {
				t.Errorf("the late payload was answered %+v, want a duplicate linked to order-50", res)
			}
			after := errorsOf(t, e.s, audit.N8NErrorReconcile)["50"]
			if after.ID != before.ID || after.URL != "http://n8n.test/workflow/wf1/executions/50" ||
				after.HTTPCode != "502" || !strings.Contains(after.Payload, "NodeApiError: at line 3") ||
				after.WorkflowName != "Orders to CRM" {
				t.Errorf("after the payload: url %q, http %q, workflow %q, payload %q", after.URL, after.HTTPCode,
					after.WorkflowName, after.Payload)
			}
			if !strings.Contains(after.Message, "CRM answered 502 for execution 50: Bad gateway") {
				t.Errorf("n8n's description is lost: %q", after.Message)
			}
		})

		t.Run("a reconcile record after its payload fills in only what the payload lacked", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t)
			intake(t, e.s, `{"execution":{"id":"60","error":{"message":"CRM answered 422"}},"workflow":{"id":"wf1"}}`)
			e.fake.addRun("60", "retry", "59", "error", t0.Add(time.Second), time.Second)
			e.clock.Advance(3 * time.Minute)
			e.pass(t)
			rec := errorsOf(t, e.s, audit.N8NErrorExecution)["60"]
			if rec.Message != "CRM answered 422" || rec.Mode != "retry" || rec.RetryOf != "59" {
				t.Errorf("after reconciliation: message %q, mode %q, retry of %q", rec.Message, rec.Mode, rec.RetryOf)
			}
			if n := len(errorsOf(t, e.s, audit.N8NErrorReconcile)); n != 0 {
				t.Errorf("%d reconcile records for an execution the intake had", n)
			}
		})

		t.Run("a refused key fails the pass", func(t *testing.T) {
			e := newReconcileEnv(t, dialect)
			e.pass(t)
			e.r.Client = n8n.New(e.fake.url(), "wrong", nil)
			e.clock.Advance(time.Minute)
			if err := e.r.Run(ctx); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("err = %v", err)
			}
		})
	})
}

// intake records a payload as the error intake does.
func intake(t *testing.T, s *store.Store, payload string) audit.N8NErrorResult {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	res, err := s.RecordError(context.Background(), n8n.ParseErrorTrigger([]byte(payload), v))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func keys(m map[string]audit.N8NErrorRecord) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
