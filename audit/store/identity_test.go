package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// restorableN8N is n8n's API as a restore from a backup leaves it: it knows
// the executions it ran since, under ids it hands out again.
type restorableN8N struct {
	mu    sync.Mutex
	execs map[string]audit.N8NExecution
	asked int
}

func (n *restorableN8N) Execution(_ context.Context, id string) (audit.N8NExecution, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked++
	if x, ok := n.execs[id]; ok {
		return x, nil
	}
	return audit.N8NExecution{}, audit.ErrExecutionNotFound
}

// run makes n8n run an execution: a webhook delivery, or a Retry of another.
func (n *restorableN8N) run(id, retryOf string, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	x := audit.N8NExecution{ID: id, WorkflowID: "wf1", Mode: "webhook", Status: "running", StartedAt: at}
	if retryOf != "" {
		x.Mode, x.RetryOf = "retry", retryOf
	}
	n.execs[id] = x
}

// restore puts n8n back as its backup had it: it knows none of the
// executions since, and hands their ids out again.
func (n *restorableN8N) restore() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.execs = map[string]audit.N8NExecution{}
}

func claim(t *testing.T, s *store.Store, event, exec string) audit.ClaimResult {
	t.Helper()
	return claimStamped(t, s, event, exec, "")
}

// claimStamped claims with a run stamp ("" for a call built by hand).
func claimStamped(t *testing.T, s *store.Store, event, exec, stamp string) audit.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: exec,
		WorkflowID: "wf1", RunStamp: stamp})
	if err != nil {
		t.Fatalf("claim %s by %s: %v", event, exec, err)
	}
	return res
}

// idResetAlerts counts the alerts that say n8n's ids started again.
func idResetAlerts(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.DB().Get(&n, `SELECT COUNT(*) FROM outbox WHERE alert_kind = 'n8n_ids_restarted'`); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRestoredN8NWithTheAPI: after n8n is restored from a backup its ids
// start again. Lineage stored for the old execution 31 ("a retry of 30")
// must not make the new 31, a plain redelivery, the holder's Retry; the new
// 30 must not pass for the old holder; a new event claimed by a reused id
// acts once; and people are told once that the ids started again.
func TestRestoredN8NWithTheAPI(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		n8n := &restorableN8N{execs: map[string]audit.N8NExecution{}}
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, Lookup: n8n})
		ctx := context.Background()

		n8n.run("30", "", clock.Now())
		if r := claim(t, s, "order-1", "30"); r.Decision != audit.DecisionClaimed {
			t.Fatalf("30: %+v", r)
		}
		clock.Advance(time.Minute)
		n8n.run("31", "30", clock.Now()) // a person pressed Retry on 30
		if r := claim(t, s, "order-1", "31"); r.Decision != audit.DecisionHeld || !r.Process {
			t.Fatalf("31, n8n's Retry of the holder 30: %+v", r)
		}

		// n8n is restored from last night's backup; its ids start again.
		clock.Advance(10 * time.Minute)
		n8n.restore()
		n8n.run("30", "", clock.Now())
		n8n.run("31", "", clock.Now().Add(time.Second))

		// The new 31 redelivers order-1: a new execution, not a Retry of
		// the holder.
		r := claim(t, s, "order-1", "31")
		if r.Process || r.Decision != audit.DecisionInProgress {
			t.Errorf("the new 31's redelivery of order-1: %+v, want in_progress", r)
		}
		if r.HolderExecutionID != "31" {
			t.Errorf("holder = %q, want the old 31, which took over as the holder's Retry", r.HolderExecutionID)
		}
		// The new 30 claims a new event once and acts; the old 30's
		// lineage does not follow it.
		if r := claim(t, s, "order-2", "30"); r.Decision != audit.DecisionClaimed || r.HolderExecutionID != "30~2" {
			t.Errorf("the new 30's new event: %+v, want claimed by 30~2", r)
		}
		if r := claim(t, s, "order-1", "30"); r.Process {
			t.Errorf("the new 30's redelivery of order-1: %+v", r)
		}
		// The old holder's outcome no longer comes: the new 31's done is no
		// report of the holder.
		_, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "order-1", ExecutionID: "31",
			WorkflowID: "wf1", Outcome: audit.OutcomeDone})
		if audit.ErrorCode(err) != audit.CodeNotHolder {
			t.Errorf("the new 31's done on order-1: %v, want not_holder", err)
		}
		ev, err := s.Event(ctx, "shop", "order-1")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Status != audit.StatusProcessing || ev.Holder != "31" {
			t.Errorf("order-1 = %s held by %s, want processing held by the old 31", ev.Status, ev.Holder)
		}
		if n := idResetAlerts(t, s); n != 1 {
			t.Errorf("%d alerts about the restart, want 1", n)
		}
		var notes []string
		for _, h := range ev.History {
			if strings.Contains(h.Message, "names a new execution") {
				notes = append(notes, h.Message)
			}
		}
		if len(notes) == 0 {
			t.Errorf("order-1's history says nothing of the reused id: %+v", ev.History)
		}
	})
}

// TestRestoredN8NWithoutTheAPI: without n8n's API, the run stamp tells an
// execution's resend (held, however long it ran) from a new execution
// reusing its id; without a stamp, an id last seen longer ago than an
// execution runs names a new execution, and one that n8n's hooks said had
// finished presents nothing again.
func TestRestoredN8NWithoutTheAPI(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, MaxRun: 2 * time.Hour})
		ctx := context.Background()

		claimStamped(t, s, "order-1", "40", "40:1:a")
		clock.Advance(90 * time.Minute)
		if r := claimStamped(t, s, "order-1", "40", "40:1:a"); r.Decision != audit.DecisionHeld {
			t.Fatalf("40's resend within its run: %+v, want held", r)
		}
		clock.Advance(3 * time.Hour)
		if r := claimStamped(t, s, "order-1", "40", "40:1:a"); r.Decision != audit.DecisionHeld {
			t.Fatalf("40's resend after longer than a run, with its stamp (a Wait node): %+v, want held", r)
		}
		if r := claimStamped(t, s, "order-1", "40", "40:2:b"); r.Process || r.Decision != audit.DecisionInProgress {
			t.Errorf("40 with another stamp: %+v, want in_progress (another execution)", r)
		}
		claim(t, s, "order-3", "60")
		clock.Advance(3 * time.Hour)
		if r := claim(t, s, "order-3", "60"); r.Process || r.Decision != audit.DecisionInProgress ||
			!strings.Contains(r.LineageNote, "longer than an execution runs") {
			t.Errorf("60 again after longer than a run, without a stamp: %+v, want in_progress (another execution)", r)
		}

		// n8n's hooks report 50's end; a claim of 50 a minute later, without
		// a stamp, is of another execution.
		start := clock.Now()
		claim(t, s, "order-2", "50")
		clock.Advance(time.Second)
		if _, err := s.RecordHookReports(ctx, []audit.N8NHookReport{{Phase: audit.PhaseEnd, ExecutionID: "50",
			WorkflowID: "wf1", Mode: "webhook", StartedAt: start, StoppedAt: clock.Now(), Status: "success"}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		if r := claim(t, s, "order-2", "50"); r.Process {
			t.Errorf("50 after n8n said it finished: %+v, want in_progress", r)
		}
		if n := idResetAlerts(t, s); n != 2 {
			t.Errorf("%d alerts about reused ids of one instance, 3 hours apart, want 2 (one a repeat interval)", n)
		}
	})
}

// TestHooksTellANewExecution: n8n's hooks report an execution's start with
// n8n's start time; a start of a known id at another time is a new
// execution, before it claims anything.
func TestHooksTellANewExecution(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		ctx := context.Background()
		report := func(phase string, started time.Time) audit.N8NHookResult {
			t.Helper()
			r := audit.N8NHookReport{Phase: phase, ExecutionID: "60", WorkflowID: "wf1", Mode: "webhook", StartedAt: started}
			res, err := s.RecordHookReports(ctx, []audit.N8NHookReport{r})
			if err != nil {
				t.Fatal(err)
			}
			return res[0]
		}
		first := clock.Now()
		report(audit.PhaseStart, first)
		claim(t, s, "order-1", "60")
		if r := report(audit.PhaseStart, first); r.NewExecution {
			t.Errorf("the same start again (a hook resending): %+v", r)
		}
		clock.Advance(5 * time.Minute)
		if r := report(audit.PhaseStart, clock.Now()); !r.NewExecution || r.ExecutionID != "60~2" {
			t.Errorf("a start of 60 five minutes later: %+v, want a new execution 60~2", r)
		}
		if r := claim(t, s, "order-1", "60"); r.Process {
			t.Errorf("the new 60's redelivery: %+v, want in_progress", r)
		}
	})
}

// TestErrorPayloadLineageNeedsN8N: an Error Trigger payload's retryOf is
// n8n's word only when n8n's API confirms it for that very execution. An
// error posted for 4800 "retrying 4711", which n8n's API says is a webhook
// run, makes 4800 no Retry of the holder 4711.
func TestErrorPayloadLineageNeedsN8N(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		n8n := &restorableN8N{execs: map[string]audit.N8NExecution{}}
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, Lookup: n8n})
		ctx := context.Background()
		n8n.run("4711", "", clock.Now())
		claim(t, s, "order-1", "4711")
		clock.Advance(time.Minute)
		n8n.run("4800", "", clock.Now())
		if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:4800",
			ExecutionID: "4800", RetryOf: "4711", Mode: "retry", WorkflowID: "wf1", Message: "boom"}); err != nil {
			t.Fatal(err)
		}
		if r := claim(t, s, "order-1", "4800"); r.Process || r.Delivery == audit.DeliveryManualRetry {
			t.Errorf("4800 after a payload said it retries 4711: %+v, want in_progress", r)
		}
		_, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: "order-1", ExecutionID: "4800",
			WorkflowID: "wf1", Outcome: audit.OutcomeDone})
		if audit.ErrorCode(err) != audit.CodeNotHolder {
			t.Errorf("4800's done: %v, want not_holder", err)
		}

		// A real Retry, which n8n's API confirms, acts.
		n8n.run("4801", "4711", clock.Now())
		if _, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:4801",
			ExecutionID: "4801", RetryOf: "4711", Mode: "retry", WorkflowID: "wf1", Message: "boom"}); err != nil {
			t.Fatal(err)
		}
		if r := claim(t, s, "order-1", "4801"); !r.Process || r.Decision != audit.DecisionHeld {
			t.Errorf("4801, n8n's Retry of 4711: %+v, want held", r)
		}
	})
}

// TestErrorsOfAReusedIDAreTheirOwn: the error of a new execution that reuses
// an id is a new error, not a duplicate of the old execution's.
func TestErrorsOfAReusedIDAreTheirOwn(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, MaxRun: time.Hour})
		ctx := context.Background()
		report := audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:70", ExecutionID: "70",
			WorkflowID: "wf1", Mode: "webhook", Message: "boom"}
		first, err := s.RecordError(ctx, report)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Hour)
		second, err := s.RecordError(ctx, report)
		if err != nil {
			t.Fatal(err)
		}
		if second.Duplicate || second.ID == first.ID || second.ExecutionID != "70~2" {
			t.Errorf("the second execution 70's error: %+v (the first: %+v)", second, first)
		}
	})
}

// TestTakeoverIsAFreshClaim: a Retry that takes an entry over starts its
// age again: it is not stale a minute later, and resolving it failed asks
// the confirmation that nothing runs, as for any fresh claim.
func TestTakeoverIsAFreshClaim(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		n8n := &restorableN8N{execs: map[string]audit.N8NExecution{}}
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now, Lookup: n8n, ReviewAfter: 15 * time.Minute})
		ctx := context.Background()
		n8n.run("80", "", clock.Now())
		claim(t, s, "order-1", "80")
		clock.Advance(40 * time.Minute)
		n8n.run("81", "80", clock.Now())
		if r := claim(t, s, "order-1", "81"); r.Decision != audit.DecisionHeld {
			t.Fatalf("81, n8n's Retry of 80: %+v", r)
		}
		clock.Advance(time.Minute)
		if n, err := s.DetectStale(ctx); err != nil || n != 0 {
			t.Errorf("a minute after the takeover, %d stale entries (%v), want 0", n, err)
		}
		_, err := s.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "order-1", To: audit.StatusFailed,
			Holder: "81", Actor: "alice", Note: "n"})
		if audit.ErrorCode(err) != audit.CodeInvalid || !strings.Contains(err.Error(), "confirm") {
			t.Errorf("resolving failed without the confirmation a minute after the takeover: %v, want it asked", err)
		}
		ev, err := s.Event(ctx, "shop", "order-1")
		if err != nil || ev.Status != audit.StatusProcessing || ev.NeedsReview {
			t.Errorf("order-1: %+v, %v", ev.Event, err)
		}
	})
}

// TestContradictionIsEvidence: the holder's done after a person resolved
// the entry failed is kept: a history line with the CRM reference, the entry
// back in review, an alert, and the key held (a redelivery waits) until a
// person decides again; its resend changes nothing more.
func TestContradictionIsEvidence(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := audittest.Open(t, dialect, store.Options{})
		ctx := context.Background()
		claim(t, s, "order-1", "90")
		if _, err := s.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "order-1", To: audit.StatusFailed,
			Holder: "90", Confirmed: true, Actor: "alice", Note: "nothing in the CRM"}); err != nil {
			t.Fatal(err)
		}
		late := audit.OutcomeRequest{Source: "shop", EventID: "order-1", ExecutionID: "90", WorkflowID: "wf1",
			Outcome: audit.OutcomeDone, CRMRef: "CRM-9"}
		res, err := s.ReportOutcome(ctx, late)
		if err != nil || !res.Changed || res.Status != audit.StatusProcessing || !res.NeedsReview {
			t.Fatalf("the holder's late done: %+v, %v; want processing, in review", res, err)
		}
		if again, err := s.ReportOutcome(ctx, late); err != nil || again.Changed {
			t.Errorf("its resend: %+v, %v; want unchanged", again, err)
		}
		if r := claim(t, s, "order-1", "91"); r.Process {
			t.Errorf("a redelivery after the contradiction: %+v, want in_progress", r)
		}
		ev, err := s.Event(ctx, "shop", "order-1")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Review != "contradiction" || !ev.NeedsReview || ev.CRMRef != "CRM-9" {
			t.Errorf("order-1: review %q, needs review %v, crm %q", ev.Review, ev.NeedsReview, ev.CRMRef)
		}
		lines := 0
		for _, h := range ev.History {
			if h.Kind == audit.KindContradiction {
				lines++
				if h.CRMRef != "CRM-9" || !strings.Contains(h.Message, "alice resolved the entry failed") {
					t.Errorf("the contradiction's line: %+v", h)
				}
			}
		}
		if lines != 1 {
			t.Errorf("%d contradiction lines, want 1", lines)
		}
		var alerts int
		if err := s.DB().Get(&alerts, `SELECT COUNT(*) FROM outbox WHERE alert_kind = 'contradiction'`); err != nil || alerts != 1 {
			t.Errorf("%d contradiction alerts (%v), want 1", alerts, err)
		}
		// A person decides again.
		if _, err := s.Resolve(ctx, audit.ResolveRequest{Source: "shop", EventID: "order-1", To: audit.StatusDone,
			Holder: "90", Actor: "alice", CRMRef: "CRM-9", Note: "found it"}); err != nil {
			t.Errorf("resolving the contradiction: %v", err)
		}
	})
}

// TestEndedIDFromAnotherWorkflow: n8n said execution 70 of wf1 finished. A
// claim of a new event by "70" of wf2, without a stamp and with no start
// time from n8n, is a second n8n sharing ids or a restore the service
// cannot tell yet: refused, recording nothing, as while 70 ran. With a
// stamp of its own it is a new execution; granted a new event, its answer
// does not say "nothing granted" (found by the model test: the end
// outranked the other workflow, and the note was judged after the grant).
func TestEndedIDFromAnotherWorkflow(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		s := audittest.Open(t, dialect, store.Options{Now: clock.Now})
		ctx := context.Background()
		start := clock.Now()
		claim(t, s, "order-1", "70")
		clock.Advance(time.Second)
		if _, err := s.RecordHookReports(ctx, []audit.N8NHookReport{{Phase: audit.PhaseEnd, ExecutionID: "70",
			WorkflowID: "wf1", Mode: "webhook", StartedAt: start, StoppedAt: clock.Now(), Status: "success"}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		other := audit.ClaimRequest{Source: "shop", EventID: "order-2", ExecutionID: "70", WorkflowID: "wf2"}
		if r, err := s.Claim(ctx, other); audit.ErrorCode(err) != audit.CodeConflict {
			t.Errorf("70 of wf2 without a stamp after wf1's 70 ended: %+v, %v; want a conflict", r, err)
		}
		if _, err := s.Event(ctx, "shop", "order-2"); audit.ErrorCode(err) != audit.CodeNotFound {
			t.Errorf("the refused claim recorded its event: %v", err)
		}
		other.RunStamp = "70:1796118942000:z"
		r, err := s.Claim(ctx, other)
		if err != nil || !r.Process || r.HolderExecutionID != "70~2" {
			t.Fatalf("70 of wf2 with a stamp of its own: %+v, %v; want claimed by 70~2", r, err)
		}
		if strings.Contains(r.LineageNote, "nothing granted") {
			t.Errorf("a granted claim says %q", r.LineageNote)
		}
	})
}
