package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// TestModel runs random schedules of simulated n8n executions against the
// real store, on SQLite and PostgreSQL, with and without n8n's API, and
// checks after every step what the service promises. RAPID_CHECKS sets the
// number of schedules per store, four stores in all (make test runs 500
// each: 1,000 per database; the default is 100); RAPID_SEED replays one. A
// failing schedule is shrunk and saved under testdata/rapid/, which later
// runs replay first; each one found is also kept as a named test in
// batch_test.go.
//
// The world: one event per schedule. Deliveries are new executions (a
// sender's retry, a second subscription, n8n starting twice); a claim's
// answer may be lost and resent by n8n's Retry On Fail within the execution;
// an execution that was told to act reports done, failed or unknown, and
// its answer too may be lost and resent, at any later time; an execution's
// n8n run may fail, the error workflow reporting it; a person may press
// Retry on a failed execution, which either re-runs the claim (the claim
// node failed) or re-runs the action and reports (a Retry resumes at the
// failed node), at any depth; executions that were told to wait may report
// anyway (a broken workflow), or fail; a client may send a retry_of n8n
// never said; an execution id may come from another workflow; the stale
// detector runs; a person resolves what the page shows them.
//
// Every step runs on two stores of the same database: one with group commit
// (bursts of claims, and bursts of outcome reports, go through it as one
// batch) and one deciding each claim and report in a transaction of its
// own. Their answers and stored entries must be the same.
//
// The invariants, after every step:
//
//  1. One holder at a time. The ledger grants the action (process true) to
//     one lineage at a time: an execution and its n8n Retries. A grant to a
//     lineage other than the one holding the entry is a failure.
//  2. A new lineage acts only with permission: on a new key, or after the
//     entry was left failed by the acting lineage's report or by a person.
//  3. Outcomes come from the holder. An outcome that moves the entry comes
//     from the lineage that holds it (or, with nothing held, from the one
//     that held it last); a person's resolution ends any hold.
//  4. Done is terminal: a done entry never moves and no claim of it
//     processes.
//  5. Every answer agrees with the stored entry and history: the status the
//     answer gives is the stored one; the history has one claim line per
//     answered claim, one outcome line per report that moved the entry, one
//     resolution line per accepted resolution, one evidence line per report
//     refused as not_holder (by execution and outcome), and one not_holder
//     alert for each of those that said done or unknown.
//  6. Errors of executions outside the holding lineage and stale checks
//     never put an entry into review nor alert about it again.
//  7. No refusal for no reason: a claim of a new key is claimed, of a failed
//     one reclaimed, of a done one duplicate, a resend by the holder held;
//     a report of the holder, or (with the n8n API) of a Retry of it at any
//     depth, is never refused while the entry is processing.
func TestModel(t *testing.T) {
	for _, dialect := range audittest.Dialects {
		for _, api := range []bool{false, true} {
			name := dialect + "/without the n8n API"
			if api {
				name = dialect + "/with the n8n API"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				w := newModelStore(t, dialect, api)
				rapid.Check(t, func(rt *rapid.T) { w.run(rt) })
			})
		}
	}
}

// modelStore is one store shared by every schedule, and beside it, on a
// database of its own, the same store deciding one claim at a time; each
// schedule has its own source and execution ids.
type modelStore struct {
	store *store.Store
	ref   *store.Store
	n8n   *modelN8N // nil without the API
	clock *audittest.Clock
	runs  atomic.Int64
}

func newModelStore(t *testing.T, dialect string, api bool) *modelStore {
	m := &modelStore{clock: audittest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	opts := store.Options{Now: m.clock.Now, ReviewAfter: 15 * time.Minute}
	if api {
		m.n8n = &modelN8N{execs: map[string]audit.N8NExecution{}}
		opts.Lookup = m.n8n
	}
	m.store = audittest.Open(t, dialect, opts)
	opts.Batching.Off = true
	m.ref = audittest.Open(t, dialect, opts)
	return m
}

// modelN8N is n8n's API as the store asks it: it knows every execution of
// the world.
type modelN8N struct {
	mu    sync.Mutex
	execs map[string]audit.N8NExecution
}

func (n *modelN8N) Execution(_ context.Context, id string) (audit.N8NExecution, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if x, ok := n.execs[id]; ok {
		return x, nil
	}
	return audit.N8NExecution{}, audit.ErrExecutionNotFound
}

func (n *modelN8N) add(x audit.N8NExecution) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.execs[x.ID] = x
}

// execution is one n8n execution of the world.
type execution struct {
	id      string
	retryOf string // n8n's, "" for a delivery
	root    string // the lineage: the delivery it retries, at any depth
	granted bool   // the ledger told it to act (its answer may have been lost)
	waited  bool   // it was told not to act
	report  *audit.OutcomeRequest
	failed  bool // its n8n run failed: a person may Retry it
	errored bool // its error reached the intake
}

// world is what the schedule has done and what the store must agree with.
type world struct {
	m     *modelStore
	t     *rapid.T
	ctx   context.Context
	run   int64
	seq   int
	event string
	execs []*execution
	byID  map[string]*execution

	// The entry as the service must have it.
	status   audit.Status // "" while the key is new
	holding  string       // the lineage (root) that holds it; "" when none
	lastRoot string       // the lineage that held it last
	claims   int          // answered claims
	moves    int          // outcomes that moved the entry
	resolved int          // accepted resolutions
	// refused are the reports refused as not_holder, by execution and
	// outcome: each is one evidence line, and one alert unless it said
	// failed.
	refused map[string]audit.Outcome
	// personal: a person's resolution settled the entry last; the holder
	// it had then may contradict it. contradicted are the contradictions
	// kept since (by execution and outcome), contradictions all of them.
	personal       bool
	contradicted   map[string]bool
	contradictions int
}

func (m *modelStore) run(t *rapid.T) {
	w := &world{m: m, t: t, ctx: context.Background(), run: m.runs.Add(1), byID: map[string]*execution{},
		refused: map[string]audit.Outcome{}, contradicted: map[string]bool{}}
	w.event = "e"
	steps := rapid.IntRange(1, 24).Draw(t, "steps")
	actions := []string{"deliver", "deliver", "burst", "resend claim", "report", "report", "report burst", "resend report",
		"fail in n8n", "error", "retry claim", "retry act", "stray report", "claimed retry_of",
		"other workflow", "stale", "resolve"}
	for i := 0; i < steps; i++ {
		switch a := rapid.SampledFrom(actions).Draw(t, "action"); a {
		case "deliver":
			w.claim(w.newExecution(""), "")
		case "burst":
			w.burst()
		case "resend claim":
			if x := w.pick("claimed", func(x *execution) bool { return x.granted || x.waited }); x != nil {
				w.claim(x, "")
			}
		case "report":
			if x := w.pick("reporter", func(x *execution) bool { return x.granted && x.report == nil }); x != nil {
				w.report(x, w.outcome())
			}
		case "report burst":
			w.reportBurst()
		case "resend report":
			if x := w.pick("resender", func(x *execution) bool { return x.report != nil }); x != nil {
				w.send(x, *x.report)
			}
		case "fail in n8n":
			if x := w.pick("failing", func(x *execution) bool { return !x.failed }); x != nil {
				x.failed = true
			}
		case "error":
			if x := w.pick("erring", func(x *execution) bool { return x.failed && !x.errored }); x != nil {
				w.intake(x)
			}
		case "retry claim":
			if x := w.pick("retried", func(x *execution) bool { return x.failed }); x != nil {
				w.claim(w.newExecution(x.id), "")
			}
		case "retry act":
			if x := w.pick("retried", func(x *execution) bool { return x.failed && x.granted }); x != nil {
				r := w.newExecution(x.id)
				r.granted = true // a person pressed Retry: it acts without claiming
				w.report(r, w.outcome())
			}
		case "stray report":
			if x := w.pick("stray", func(x *execution) bool { return x.waited && x.report == nil }); x != nil {
				w.report(x, w.outcome())
			}
		case "claimed retry_of":
			if x := w.pick("named", func(*execution) bool { return true }); x != nil {
				w.claim(w.newExecution(""), x.id)
			}
		case "other workflow":
			if x := w.pick("impostor of", func(*execution) bool { return true }); x != nil {
				w.impostor(x)
			}
		case "stale":
			w.stale()
		case "resolve":
			w.resolve()
		}
		w.check()
	}
}

// newExecution starts an execution: a delivery, or a Retry of retryOf.
func (w *world) newExecution(retryOf string) *execution {
	w.seq++
	x := &execution{id: fmt.Sprintf("r%d-x%d", w.run, w.seq), retryOf: retryOf}
	x.root = x.id
	if p := w.byID[retryOf]; p != nil {
		x.root = p.root
	}
	mode := "webhook"
	if retryOf != "" {
		mode = "retry"
	}
	w.m.n8n.add(audit.N8NExecution{ID: x.id, WorkflowID: "wf", Mode: mode, RetryOf: retryOf})
	w.execs = append(w.execs, x)
	w.byID[x.id] = x
	return x
}

// pick draws one execution that ok accepts, or nil.
func (w *world) pick(label string, ok func(*execution) bool) *execution {
	var cands []*execution
	for _, x := range w.execs {
		if ok(x) {
			cands = append(cands, x)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return rapid.SampledFrom(cands).Draw(w.t, label)
}

func (w *world) outcome() audit.Outcome {
	return rapid.SampledFrom([]audit.Outcome{audit.OutcomeDone, audit.OutcomeFailed, audit.OutcomeUnknown}).Draw(w.t, "outcome")
}

func (w *world) source() string { return fmt.Sprintf("model-%d", w.run) }

// stored reads the entry; false while the key is new.
func (w *world) stored() (audit.EventDetail, bool) {
	d, err := w.m.store.Event(w.ctx, w.source(), w.event)
	if audit.ErrorCode(err) == audit.CodeNotFound {
		return d, false
	}
	if err != nil {
		w.t.Fatalf("read event: %v", err)
	}
	return d, true
}

func (w *world) claim(x *execution, claimedRetryOf string) {
	before := w.status
	holder := ""
	if d, ok := w.stored(); ok {
		holder = d.HolderExecutionID
	}
	req := audit.ClaimRequest{Source: w.source(), EventID: w.event, ExecutionID: x.id, WorkflowID: "wf",
		RetryOf: claimedRetryOf}
	res, err := w.m.store.Claim(w.ctx, req)
	ref, rerr := w.m.ref.Claim(w.ctx, req)
	w.same("claim by "+x.id, res, ref, err, rerr)
	w.decided(x, before, holder, res, err)
}

// decided checks one claim's answer against the world and moves the world.
func (w *world) decided(x *execution, before audit.Status, holder string, res audit.ClaimResult, err error) {
	if err != nil {
		w.t.Fatalf("claim by %s: %v", x.id, err)
	}
	w.claims++
	// 7: no refusal for no reason.
	switch {
	case before == "" && res.Decision != audit.DecisionClaimed:
		w.t.Fatalf("a new key: %s, want claimed", res.Decision)
	case before == audit.StatusFailed && res.Decision != audit.DecisionReclaimed:
		w.t.Fatalf("a failed entry: %s, want reclaimed", res.Decision)
	case before == audit.StatusDone && res.Decision != audit.DecisionDuplicate:
		w.t.Fatalf("a done entry: %s, want duplicate", res.Decision) // 4
	case before == audit.StatusProcessing && holder == x.id && res.Decision != audit.DecisionHeld:
		w.t.Fatalf("the holder %s resends: %s, want held", x.id, res.Decision)
	}
	if !res.Process {
		x.waited = true
		w.answered("claim by "+x.id, res.Status)
		return
	}
	// 1 and 2.
	switch {
	case w.holding != "" && w.holding != x.root:
		w.t.Fatalf("%s (lineage %s) was told to act while lineage %s holds the entry", x.id, x.root, w.holding)
	case w.holding == "" && before != "" && before != audit.StatusFailed:
		w.t.Fatalf("%s was told to act on a %s entry nobody holds", x.id, before)
	}
	x.granted = true
	w.status, w.holding, w.lastRoot = audit.StatusProcessing, x.root, x.root
	w.answered("claim by "+x.id, res.Status)
}

// answered checks that the status an answer gave is the entry's (5).
func (w *world) answered(what string, got audit.Status) {
	if got != w.status {
		w.t.Fatalf("%s answered status %s; the entry is %s", what, got, w.status)
	}
}

// mayMove reports whether x may move the entry as it was stored: x holds
// it, or x is an n8n Retry (at any depth) of its holder and the service can
// ask n8n so.
func (w *world) mayMove(x *execution, d audit.EventDetail) bool {
	if d.HolderExecutionID == x.id {
		return true
	}
	if w.m.n8n == nil {
		return false
	}
	for p := w.byID[x.retryOf]; p != nil; p = w.byID[p.retryOf] {
		if p.id == d.HolderExecutionID {
			return true
		}
	}
	return false
}

// burst is several executions presenting the event at once, decided as one
// batch by the group commit and one by one by the other store.
func (w *world) burst() {
	n := rapid.IntRange(2, 5).Draw(w.t, "burst")
	var xs []*execution
	var reqs []audit.ClaimRequest
	for i := 0; i < n; i++ {
		x := w.pick("resender", func(x *execution) bool { return x.granted || x.waited })
		if x == nil || rapid.Bool().Draw(w.t, "new delivery") {
			x = w.newExecution("")
		}
		xs = append(xs, x)
		reqs = append(reqs, audit.ClaimRequest{Source: w.source(), EventID: w.event, ExecutionID: x.id, WorkflowID: "wf",
			DeliveryID: rapid.SampledFrom([]string{"", "d1", "d2"}).Draw(w.t, "delivery id")})
	}
	holder := ""
	if d, ok := w.stored(); ok {
		holder = d.HolderExecutionID
	}
	got, errs := w.m.store.ClaimTogether(w.ctx, reqs)
	for i, req := range reqs {
		ref, rerr := w.m.ref.Claim(w.ctx, req)
		w.same("burst claim by "+req.ExecutionID, got[i], ref, errs[i], rerr)
		before := w.status
		w.decided(xs[i], before, holder, got[i], errs[i])
		if d, ok := w.stored(); ok {
			holder = d.HolderExecutionID
		}
	}
}

// same fails the schedule when the two stores answered differently.
func (w *world) same(what string, a, b any, errA, errB error) {
	if fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprint(errA) != fmt.Sprint(errB) {
		w.t.Fatalf("%s: group commit answered %+v (%v), one by one %+v (%v)", what, a, errA, b, errB)
	}
}

func (w *world) report(x *execution, o audit.Outcome) {
	req := audit.OutcomeRequest{Source: w.source(), EventID: w.event, ExecutionID: x.id, WorkflowID: "wf",
		Outcome: o, CRMRef: "crm-" + x.id}
	x.report = &req
	w.send(x, req)
}

func (w *world) send(x *execution, req audit.OutcomeRequest) {
	before, _ := w.stored()
	res, err := w.m.store.ReportOutcome(w.ctx, req)
	ref, rerr := w.m.ref.ReportOutcome(w.ctx, req)
	w.same("report by "+x.id, res, ref, err, rerr)
	w.reported(x, req, before, res, err)
}

// reportBurst is several executions reporting at once (an execution and
// its Retry, strays, resends), decided as one batch by the group commit and
// one by one, in the same order, by the other store.
func (w *world) reportBurst() {
	n := rapid.IntRange(2, 4).Draw(w.t, "reports")
	var xs []*execution
	var reqs []audit.OutcomeRequest
	for i := 0; i < n; i++ {
		x := w.pick("burst reporter", func(x *execution) bool { return x.granted || x.waited })
		if x == nil {
			return
		}
		if x.report == nil {
			x.report = &audit.OutcomeRequest{Source: w.source(), EventID: w.event, ExecutionID: x.id, WorkflowID: "wf",
				Outcome: w.outcome(), CRMRef: "crm-" + x.id}
		}
		xs, reqs = append(xs, x), append(reqs, *x.report)
	}
	got, errs := w.m.store.ReportTogether(w.ctx, reqs)
	for i, req := range reqs {
		// The batch decided in arrival order: what the one-by-one store
		// holds before report i is what report i met.
		before, err := w.m.ref.Event(w.ctx, w.source(), w.event)
		if err != nil && audit.ErrorCode(err) != audit.CodeNotFound {
			w.t.Fatalf("read event: %v", err)
		}
		ref, rerr := w.m.ref.ReportOutcome(w.ctx, req)
		w.same("burst report by "+req.ExecutionID, got[i], ref, errs[i], rerr)
		w.reported(xs[i], req, before, got[i], errs[i])
	}
}

// reported checks one report's answer against the world and moves the
// world; before is the entry the report met.
func (w *world) reported(x *execution, req audit.OutcomeRequest, before audit.EventDetail, res audit.OutcomeResult, err error) {
	switch code := audit.ErrorCode(err); code {
	case audit.CodeNotFound:
		if w.status != "" {
			w.t.Fatalf("%s's report: not found, but the key exists", x.id)
		}
		return
	case audit.CodeConflict, audit.CodeNotHolder:
		// 8: the holder contradicting a person's done is kept as
		// evidence, once.
		if code == audit.CodeConflict && w.personal && w.status == audit.StatusDone && before.HolderExecutionID == x.id &&
			req.Outcome != audit.OutcomeDone && !w.contradicted[x.id+" "+string(req.Outcome)] {
			w.contradicted[x.id+" "+string(req.Outcome)] = true
			w.contradictions++
		}
		// 7: the holder's report, or its Retry's, moves a processing entry,
		// unless it waits for a person after a contradiction.
		if before.Status == audit.StatusProcessing && w.mayMove(x, before) && before.ReviewReason != "contradiction" {
			w.t.Fatalf("%s's %s was refused (%v), but it may move the entry %s holds", x.id, req.Outcome, err,
				before.HolderExecutionID)
		}
		var e *audit.Error
		if errors.As(err, &e) && e.Status != w.status {
			w.t.Fatalf("%s's refusal gave status %s; the entry is %s", x.id, e.Status, w.status)
		}
		if code == audit.CodeNotHolder {
			w.refused[x.id+" "+string(req.Outcome)] = req.Outcome
		}
		return
	}
	if err != nil {
		w.t.Fatalf("report by %s: %v", x.id, err)
	}
	if !res.Changed {
		if before.HolderExecutionID != x.id {
			w.t.Fatalf("%s's report answered unchanged, but %s holds the entry", x.id, before.HolderExecutionID)
		}
		w.answered("report by "+x.id, res.Status)
		return
	}
	// 8: the holder contradicting a person's failed puts the entry back
	// to processing, held by it, waiting for a person.
	if w.personal && w.status == audit.StatusFailed && before.HolderExecutionID == x.id && req.Outcome != audit.OutcomeFailed {
		if !res.NeedsReview || res.Status != audit.StatusProcessing {
			w.t.Fatalf("%s contradicted a person's failed with %s: %+v, want processing in review", x.id, req.Outcome, res)
		}
		w.contradicted[x.id+" "+string(req.Outcome)] = true
		w.contradictions++
		w.status, w.holding, w.lastRoot = audit.StatusProcessing, x.root, x.root
		return
	}
	// 3 and 4.
	switch {
	case w.status == audit.StatusDone:
		w.t.Fatalf("%s moved a done entry to %s", x.id, res.Status)
	case w.holding != "" && w.holding != x.root:
		w.t.Fatalf("%s (lineage %s) moved the entry lineage %s holds", x.id, x.root, w.holding)
	case w.holding == "" && w.lastRoot != x.root:
		w.t.Fatalf("%s (lineage %s) moved the entry lineage %s left", x.id, x.root, w.lastRoot)
	}
	w.moves++
	w.lastRoot, w.personal = x.root, false
	switch req.Outcome {
	case audit.OutcomeDone:
		w.status, w.holding = audit.StatusDone, ""
	case audit.OutcomeFailed:
		w.status, w.holding = audit.StatusFailed, ""
	default:
		w.status, w.holding = audit.StatusProcessing, x.root
	}
	w.answered("report by "+x.id, res.Status)
}

// intake posts the error workflow's payload for a failed execution.
func (w *world) intake(x *execution) {
	x.errored = true
	before, exists := w.stored()
	mode := "webhook"
	if x.retryOf != "" {
		mode = "retry"
	}
	report := audit.N8NErrorReport{Kind: audit.N8NErrorExecution, DedupeKey: "exec:" + x.id,
		ExecutionID: x.id, RetryOf: x.retryOf, WorkflowID: "wf", Mode: mode, Message: "failed"}
	for _, s := range []*store.Store{w.m.store, w.m.ref} {
		if _, err := s.RecordError(w.ctx, report); err != nil {
			w.t.Fatalf("error of %s: %v", x.id, err)
		}
	}
	if !exists {
		return
	}
	after, _ := w.stored()
	// 6: an error outside the holding lineage changes no review and
	// alerts nobody.
	if w.holding == "" || x.root != w.holding {
		if after.ReviewReason != before.ReviewReason {
			w.t.Fatalf("the error of %s (lineage %s, holding %q) moved review from %q to %q", x.id, x.root, w.holding,
				before.ReviewReason, after.ReviewReason)
		}
		if a, b := eventAlerts(after), eventAlerts(before); a != b {
			w.t.Fatalf("the error of %s (lineage %s, holding %q) wrote %d alerts", x.id, x.root, w.holding, a-b)
		}
	}
	if x.id == before.HolderExecutionID && before.Status == audit.StatusProcessing && after.ReviewReason == "" {
		w.t.Fatalf("the holder's error put the entry into no review")
	}
}

// impostor claims with a known execution id from another workflow.
func (w *world) impostor(x *execution) {
	req := audit.ClaimRequest{Source: w.source(), EventID: w.event, ExecutionID: x.id, WorkflowID: "other-n8n"}
	res, err := w.m.store.Claim(w.ctx, req)
	ref, rerr := w.m.ref.Claim(w.ctx, req)
	w.same("impostor "+x.id, res, ref, err, rerr)
	if audit.ErrorCode(err) != audit.CodeConflict {
		w.t.Fatalf("a claim of execution %s from another workflow: %v, want a conflict", x.id, err)
	}
}

func (w *world) stale() {
	before, exists := w.stored()
	w.m.clock.Advance(16 * time.Minute)
	for _, s := range []*store.Store{w.m.store, w.m.ref} {
		if _, err := s.DetectStale(w.ctx); err != nil {
			w.t.Fatalf("stale detector: %v", err)
		}
	}
	if !exists || before.ReviewReason == "" {
		return
	}
	after, _ := w.stored()
	if staleLines(after) != staleLines(before) || eventAlerts(after) != eventAlerts(before) {
		w.t.Fatalf("the stale detector alerted about an entry already in review (%s)", before.ReviewReason)
	}
}

// eventAlerts counts the alerts written about an event, news in its thread
// and refreshes of its first message aside.
func eventAlerts(d audit.EventDetail) int {
	n := 0
	for _, row := range d.Alerts {
		var a audit.Alert
		if row.Kind != audit.RowRefresh && json.Unmarshal([]byte(row.Payload), &a) == nil && a.Kind != audit.AlertNews {
			n++
		}
	}
	return n
}

// sameEntry compares what two stores keep of an entry, times apart.
func sameEntry(a, b audit.EventDetail) bool { return entryLine(a) == entryLine(b) }

func entryLine(d audit.EventDetail) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s holder %s review %q deliveries %d crm %q |", d.Status, d.HolderExecutionID, d.ReviewReason,
		d.Deliveries, d.CRMRef)
	for _, l := range d.History {
		fmt.Fprintf(&b, " %s:%s:%s:%s:%s:%s", l.Kind, l.ExecutionID, l.Decision, l.Delivery, l.Class, l.Message)
	}
	return b.String()
}

func staleLines(d audit.EventDetail) int {
	n := 0
	for _, l := range d.History {
		if l.Kind == audit.KindStale {
			n++
		}
	}
	return n
}

// resolve is a person reading the page and deciding.
func (w *world) resolve() {
	d, exists := w.stored()
	if !exists || d.Status != audit.StatusProcessing {
		return
	}
	to := rapid.SampledFrom([]audit.Status{audit.StatusDone, audit.StatusFailed}).Draw(w.t, "resolve to")
	confirmed := rapid.Bool().Draw(w.t, "confirmed")
	req := audit.ResolveRequest{Source: w.source(), EventID: w.event, To: to,
		Actor: "alice", Note: "checked the CRM", Holder: d.HolderExecutionID, Confirmed: confirmed}
	st, err := w.m.store.Resolve(w.ctx, req)
	rst, rerr := w.m.ref.Resolve(w.ctx, req)
	w.same("resolution", st, rst, err, rerr)
	switch {
	case err == nil:
		if !confirmed && !d.NeedsReview {
			w.t.Fatalf("a running entry was resolved without the confirmation")
		}
		w.resolved++
		w.status, w.holding, w.personal = to, "", true
		w.contradicted = map[string]bool{}
	case audit.ErrorCode(err) == audit.CodeInvalid && !confirmed && !d.NeedsReview:
	default:
		w.t.Fatalf("resolve %s (review %v, confirmed %v): %v", to, d.NeedsReview, confirmed, err)
	}
}

// check compares the stored entry and its history with the world (5), and
// with what the one-by-one store has.
func (w *world) check() {
	d, exists := w.stored()
	r, rexists := w.m.ref.Event(w.ctx, w.source(), w.event)
	if exists != (rexists == nil) || exists && !sameEntry(d, r) {
		w.t.Fatalf("the stores differ:\ngroup commit %s\none by one   %s", entryLine(d), entryLine(r))
	}
	if !exists {
		if w.status != "" {
			w.t.Fatalf("the entry is gone; the world has it %s", w.status)
		}
		return
	}
	if d.Status != w.status {
		w.t.Fatalf("stored status %s, the world's %s", d.Status, w.status)
	}
	if w.holding != "" {
		if h := w.byID[d.HolderExecutionID]; h == nil || h.root != w.holding {
			w.t.Fatalf("stored holder %s is not of the holding lineage %s", d.HolderExecutionID, w.holding)
		}
	}
	count := map[string]int{}
	for _, l := range d.History {
		count[l.Kind]++
	}
	if count[audit.KindClaim] != w.claims || count[audit.KindOutcome] != w.moves || count[audit.KindResolution] != w.resolved {
		w.t.Fatalf("history has %d claims, %d outcomes, %d resolutions; the answers were %d, %d, %d",
			count[audit.KindClaim], count[audit.KindOutcome], count[audit.KindResolution], w.claims, w.moves, w.resolved)
	}
	if count[audit.KindContradiction] != w.contradictions {
		w.t.Fatalf("history has %d contradiction lines; %d reports contradicted a person", count[audit.KindContradiction],
			w.contradictions)
	}
	if count[audit.KindNotHolder] != len(w.refused) {
		w.t.Fatalf("history has %d evidence lines; %d reports were refused as not_holder", count[audit.KindNotHolder],
			len(w.refused))
	}
	alerted := 0
	for _, o := range w.refused {
		if o != audit.OutcomeFailed {
			alerted++
		}
	}
	kinds := 0
	for _, row := range d.Alerts {
		var a audit.Alert
		if row.Kind != audit.RowRefresh && json.Unmarshal([]byte(row.Payload), &a) == nil && a.Kind == audit.AlertNotHolder {
			kinds++
		}
	}
	if kinds != alerted {
		w.t.Fatalf("%d not_holder alerts; %d refused reports said done or unknown", kinds, alerted)
	}
	if d.Status == audit.StatusDone && !slices.ContainsFunc(d.History, func(l audit.HistoryLine) bool {
		return (l.Kind == audit.KindOutcome || l.Kind == audit.KindResolution) && l.Decision == "done"
	}) {
		w.t.Fatalf("done without a done outcome or resolution in the history")
	}
}
