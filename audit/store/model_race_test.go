package store_test

import (
	"sync"

	"pgregory.net/rapid"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
)

// racer is one request of a race: a claim or a report, sent to the
// group-commit store or (on PostgreSQL) to its sibling on the same
// database.
type racer struct {
	x      *execution
	claim  *audit.ClaimRequest
	report *audit.OutcomeRequest
	s      *store.Store

	res    audit.ClaimResult
	out    audit.OutcomeResult
	err    error
	holder string // the entry's holder before the race
}

// race ends a schedule: two to six claims and reports sent at once from
// goroutines through the group-commit queue. Their order is not known, so
// the world cannot follow them one by one: what is checked is what holds
// in any order.
func (w *world) race() {
	n := rapid.IntRange(2, 6).Draw(w.t, "racers")
	var rs []*racer
	for i := 0; i < n; i++ {
		r := &racer{s: w.m.store}
		if w.m.sibling != nil && rapid.Bool().Draw(w.t, "through the sibling") {
			r.s = w.m.sibling
		}
		switch rapid.IntRange(0, 2).Draw(w.t, "racer") {
		case 0:
			r.x = w.newExecution(nil, w.drawEvent())
		case 1:
			if r.x = w.pick("racing resender", (*execution).claimed); r.x == nil {
				r.x = w.newExecution(nil, w.drawEvent())
			}
		default:
			// Reports of events a person settled last may contradict
			// them: that is the sequential model's (9).
			r.x = w.pick("racing reporter", func(x *execution) bool { return x.granted && !w.entry(x.event).personal })
			if r.x == nil {
				continue
			}
			if r.x.report == nil {
				r.x.report = w.outcomeRequest(r.x, w.outcome())
			}
			r.report = r.x.report
		}
		if r.report == nil {
			req := w.claimRequest(r.x, "")
			r.claim = &req
		}
		rs = append(rs, r)
	}
	before := map[string]entry{}
	for ev, e := range w.entries {
		before[ev] = *e
	}
	for _, r := range rs {
		r.holder = w.holder(r.x.event)
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if r.claim != nil {
				r.res, r.err = r.s.Claim(w.ctx, *r.claim)
			} else {
				r.out, r.err = r.s.ReportOutcome(w.ctx, *r.report)
			}
		}()
	}
	close(start)
	wg.Wait()

	for ev, b := range before {
		w.raced(ev, b, rs)
	}
}

// raced checks one event after a race: b is its entry before.
func (w *world) raced(ev string, b entry, rs []*racer) {
	granted := map[string]bool{}               // lineages told to act, the holding one aside
	movers := map[string]bool{b.holding: true} // lineages that held the entry at some moment
	if b.holding == "" {
		movers[b.lastRoot] = true
	}
	claims, moves, failures := 0, 0, 0
	for _, r := range rs {
		if r.x.event != ev || r.claim == nil {
			continue
		}
		if r.err != nil {
			w.t.Fatalf("racing claim by %s: %v", r.x.key, r.err)
		}
		claims++
		if r.res.Process {
			movers[r.x.root] = true
			if r.x.root != b.holding {
				granted[r.x.root] = true
			}
		}
		if r.res.Process && b.status == audit.StatusDone {
			w.t.Fatalf("racing claim by %s acts on a done entry (4)", r.x.key)
		}
	}
	for _, r := range rs {
		if r.x.event != ev || r.report == nil {
			continue
		}
		switch audit.ErrorCode(r.err) {
		case audit.CodeNotHolder, audit.CodeConflict:
			continue
		}
		if r.err != nil {
			w.t.Fatalf("racing report by %s: %v", r.x.key, r.err)
		}
		if !r.out.Changed {
			continue
		}
		moves++
		if r.report.Outcome == audit.OutcomeFailed {
			failures++
		}
		switch {
		case b.status == audit.StatusDone:
			w.t.Fatalf("racing %s of %s moved a done entry (4)", r.report.Outcome, r.x.key)
		case !movers[r.x.root]:
			w.t.Fatalf("racing %s of %s (lineage %s) moved an entry its lineage never held (3)", r.report.Outcome,
				r.x.key, r.x.root)
		}
	}
	// 1 and 2: a new lineage for each permission, in any order.
	allowed := failures
	if b.status == "" || b.status == audit.StatusFailed {
		allowed++
	}
	if len(granted) > allowed {
		w.t.Fatalf("in a race on %s (%s, held by lineage %q), %d other lineages were told to act with %d permissions: %v",
			ev, b.status, b.holding, len(granted), allowed, granted)
	}
	d, exists := w.stored(w.m.store, ev)
	if !exists {
		if claims > 0 {
			w.t.Fatalf("%d racing claims of %s answered, and no entry", claims, ev)
		}
		return
	}
	if b.status == audit.StatusDone && d.Status != audit.StatusDone {
		w.t.Fatalf("the done %s is %s after a race (4)", ev, d.Status)
	}
	if d.Status == audit.StatusProcessing {
		if h := w.byKey[d.Holder]; h == nil || !movers[h.root] {
			w.t.Fatalf("%s is held by %s after a race, whose lineage was never told to act", ev, d.Holder)
		}
	}
	count := map[string]int{}
	for _, l := range d.History {
		count[l.Kind]++
	}
	if count[audit.KindClaim] != b.claims+claims || count[audit.KindOutcome] != b.moves+moves {
		w.t.Fatalf("%s: history has %d claims and %d outcomes after a race; the answers were %d and %d", ev,
			count[audit.KindClaim], count[audit.KindOutcome], b.claims+claims, b.moves+moves)
	}
}
