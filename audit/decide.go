package audit

import (
	"fmt"
	"time"
)

// Rules are the settings the decisions read.
type Rules struct {
	// MaxRun is the longest an n8n execution runs between two calls (a Wait
	// node's pause excepted): an id unseen for longer names another one.
	// Zero or negative turns the rule off.
	MaxRun time.Duration
	// ReviewAfter is how long an entry may stay processing before a person
	// should look; a younger one is resolved only with the confirmation
	// that nothing runs.
	ReviewAfter time.Duration
}

// Decider decides a batch of requests against what the store read under
// its locks (the snapshot), in the order they came: each sees what the
// ones before it decided. It does no I/O; what it decides to write
// collects in its plan, and the snapshot's entries, executions and
// presences it changed are marked dirty.
type Decider struct {
	snap  *Snapshot
	now   time.Time
	rules Rules
	plan  Plan
	// errKeys are the errors recorded by this batch, by dedupe key.
	errKeys map[string]N8NErrorResult
}

// NewDecider starts the decisions of one batch at now.
func NewDecider(snap *Snapshot, now time.Time, rules Rules) *Decider {
	return &Decider{snap: snap, now: now, rules: rules, errKeys: map[string]N8NErrorResult{}}
}

// Plan returns what the batch's decisions write: the dirty rows of the
// snapshot and the plan's own.
func (d *Decider) Plan() *Plan {
	p := d.plan
	for _, e := range d.snap.Entries {
		if e.Dirty {
			p.Entries = append(p.Entries, e)
		}
	}
	for _, x := range d.snap.Execs {
		if x.Dirty {
			p.Execs = append(p.Execs, x)
		}
	}
	for _, pr := range d.snap.Presences {
		if pr.Dirty {
			p.Presences = append(p.Presences, pr)
		}
	}
	p.sort()
	return &p
}

// whoFor says who an identity is, seen from an entry.
func whoFor(e *Entry, id Identity) Who {
	switch {
	case e == nil || e.Holder == "" || id.ID == "":
		return WhoOther
	case e.Holder == id.ID && id.Proven:
		return WhoHolder
	case e.Holder == id.ID:
		return WhoUnproven
	case id.retries(e.Holder):
		return WhoRetry
	}
	return WhoOther
}

// decide looks the row up; a combination the table lacks is a bug, not an
// answer.
func (d *Decider) decide(e *Entry, a Act, w Who) Row {
	row, ok := rowFor(StateOf(e), a, w)
	if !ok {
		panic(fmt.Sprintf("audit: no row for %s × %s × %s", StateOf(e), a, w))
	}
	return row
}

// apply moves an entry as a row says, for actor (an execution's id, or a
// person's name when person); outcome is the status a report names. It
// reports whether the entry changed (its version moved).
func (d *Decider) apply(e *Entry, row Row, actor string, person bool, outcome Status) bool {
	changed := false
	if row.Take && e.Holder != actor {
		e.Holder, e.Since, changed = actor, d.now, true
	}
	next := row.Next
	if next == nextOutcome {
		next = outcome
		if outcome == Status(OutcomeUnknown) {
			next = StatusProcessing
		}
	}
	if next != "" && e.Status != next {
		e.Status, e.Since, changed = next, d.now, true
	}
	switch {
	case row.Review == clearReview && e.Review != "":
		e.Review, changed = "", true
	case row.Review == "" || row.Review == clearReview:
	case row.Review == ReviewNotHolder && e.Review != "":
		// A weaker reason never replaces another.
	case e.Review != row.Review:
		e.Review, e.ReviewSince, changed = row.Review, d.now, true
	}
	if next != "" || row.Take {
		who := ""
		if person {
			who = actor
		}
		if e.ResolvedBy != who {
			e.ResolvedBy, changed = who, true
		}
	}
	if changed {
		e.Version++
	}
	e.LastSeen, e.Dirty = d.now, true
	return changed
}

// entry returns the entry of a key, made (not stored yet) when it is new.
func (d *Decider) entry(k EntryKey) *Entry {
	e := d.snap.Entries[k]
	if e == nil {
		e = &Entry{EntryKey: k, Created: d.now, Since: d.now}
		d.snap.Entries[k] = e
	}
	return e
}

// exists reports whether an entry is in the ledger (stored, or made by
// this batch).
func exists(e *Entry) bool { return e != nil && (e.Stored || e.Status != "") }

// line adds a history line about an entry, as it stands.
func (d *Decider) line(e *Entry, h HistoryLine) *Line {
	h.Source, h.EventID, h.Item, h.At = e.Source, e.EventID, e.Item, d.now
	if h.Status == "" {
		h.Status = string(e.Status)
	}
	d.plan.Lines = append(d.plan.Lines, Line{HistoryLine: h, Version: d.event(e).Version})
	return &d.plan.Lines[len(d.plan.Lines)-1]
}

// event returns the event an entry belongs to (itself, for an event).
func (d *Decider) event(e *Entry) *Entry {
	if e.Item == "" {
		return e
	}
	return d.snap.Entries[EntryKey{Source: e.Source, EventID: e.EventID}]
}

// count adds one to each metric for a source and workflow.
func (d *Decider) count(source, workflowID string, metrics ...string) {
	if d.plan.Counters == nil {
		d.plan.Counters = map[CounterKey]int{}
	}
	for _, m := range metrics {
		d.plan.Counters[CounterKey{Source: source, WorkflowID: workflowID, Metric: m}]++
	}
}

// workflowOf returns the workflow the service knows an execution by.
func (d *Decider) workflowOf(id string) string {
	if x := d.snap.Execs[id]; x != nil {
		return x.WorkflowID
	}
	return ""
}

func entryName(k EntryKey) string {
	if k.Item != "" {
		return k.Source + "/" + k.EventID + " item " + k.Item
	}
	return k.Source + "/" + k.EventID
}

func holderName(h string) string {
	if h == "" {
		return "none"
	}
	return h
}
