package audit

import (
	"fmt"
	"time"
)

// The transitions of a ledger entry, written down once: the state it is in,
// what happened, and who it came from, to what it becomes, the answer, and
// what is written beside it. Every decision the ledger makes about an
// entry is a row of this table (decide); the rest of the code finds out the
// state and who (identify, whoFor) and writes what the row says (apply).
// The first row that matches wins; "*" matches anything.
//
// States: an entry is new (no row), processing, done, failed or cancelled;
// ":contradiction" is a processing entry whose holder contradicted a
// person's resolution (it waits for a person), ":person" a done or failed
// entry a person settled last.
//
// Who: the holder (its run stamp, or n8n's API asked now, shows that it is
// the execution holding the entry); holder? (the holder's id, but nothing
// shows it is that execution: no stamp, n8n silent); retry (an n8n Retry
// of the holder, at any depth, by n8n's word or a replayed stamp); other
// (any other execution); person; detector (the stale detector).

// State is an entry's state as the table reads it.
type State string

// The states.
const (
	StNew            State = "new"
	StProcessing     State = "processing"
	StContradicted   State = "processing:contradiction"
	StDone           State = "done"
	StDoneByPerson   State = "done:person"
	StFailed         State = "failed"
	StFailedByPerson State = "failed:person"
	StCancelled      State = "cancelled"
	anyProcessing    State = "processing*"
	anyDone          State = "done*"
	anyFailed        State = "failed*"
	anyState         State = "*"
)

// Act is what happened to an entry.
type Act string

// The acts.
const (
	ActClaim         Act = "claim"
	ActDone          Act = "done"
	ActFailed        Act = "failed"
	ActUnknown       Act = "unknown"
	ActError         Act = "error"
	ActStale         Act = "stale"
	ActResolveDone   Act = "resolve:done"
	ActResolveFailed Act = "resolve:failed"
	ActCancel        Act = "cancel"
	ActRetry         Act = "retry"
	ActLookup        Act = "lookup"
	anyOutcome       Act = "done|failed|unknown"
	doneOrUnknown    Act = "done|unknown"
	failedOrUnknown  Act = "failed|unknown"
	anyResolve       Act = "resolve:*"
	anyAct           Act = "*"
)

// Who is who an act came from, seen from the entry.
type Who string

// Who acts.
const (
	WhoHolder   Who = "holder"
	WhoUnproven Who = "holder?"
	WhoRetry    Who = "retry"
	WhoOther    Who = "other"
	WhoPerson   Who = "person"
	WhoDetector Who = "detector"
	holderish   Who = "holder|holder?"
	holderOrRe  Who = "holder|holder?|retry"
	anyone      Who = "*"
)

// Answer is what a row answers.
type Answer string

// The answers.
const (
	AnsClaimed    Answer = "claimed"
	AnsReclaimed  Answer = "reclaimed"
	AnsHeld       Answer = "held"
	AnsInProgress Answer = "in_progress"
	AnsDuplicate  Answer = "duplicate"
	AnsCancelled  Answer = "cancelled"
	AnsChanged    Answer = "changed"   // the act moved the entry
	AnsUnchanged  Answer = "unchanged" // accepted; it moved nothing (a resend, agreement, a kept contradiction)
	AnsNotHolder  Answer = "not_holder"
	AnsConflict   Answer = "conflict" // the state does not allow it
	AnsNotFound   Answer = "not_found"
	AnsRecorded   Answer = "recorded" // an error or a stale check: written down
)

// Row is one transition.
type Row struct {
	State  State
	Act    Act
	Who    Who
	Next   Status // the status it becomes; "" keeps it
	Take   bool   // the acting execution becomes the holder (a takeover starts the entry's age again)
	Review string // the review reason it sets; "-" clears it; "" keeps it
	Answer Answer
	Line   string // the history line's kind; "" writes none
	Alert  string // the alert it writes (its thread's first message, or a reply); "" none
	News   bool   // a reply in the entry's thread, when people were alerted about it
	Why    string
}

// clearReview is Row.Review's value that clears the review reason;
// nextOutcome is Row.Next's value for the status the report names.
const (
	clearReview        = "-"
	nextOutcome Status = "=outcome"
)

// Table is every transition of a ledger entry.
var Table = []Row{
	// Claims.
	{StNew, ActClaim, anyone, StatusProcessing, true, "", AnsClaimed, KindClaim, "", false,
		"a new key: the caller is first"},
	{anyFailed, ActClaim, anyone, StatusProcessing, true, clearReview, AnsReclaimed, KindClaim, "", true,
		"it certainly did not happen: the caller captures it"},
	{StProcessing, ActClaim, WhoHolder, "", false, "", AnsHeld, KindClaim, "", false,
		"the holder again (a resend within its run): a lost answer must not lock it out"},
	{StContradicted, ActClaim, WhoHolder, "", false, "", AnsHeld, KindClaim, "", false,
		"the holder again: it holds it, a person decides its outcome"},
	{anyProcessing, ActClaim, WhoUnproven, "", false, "", AnsInProgress, KindClaim, "", false,
		"the holder's id, but nothing shows it is that execution (no run stamp, n8n silent): nothing granted"},
	{StProcessing, ActClaim, WhoRetry, "", true, clearReview, AnsHeld, KindClaim, "", true,
		"an n8n Retry of the holder takes over: a fresh claim"},
	{anyProcessing, ActClaim, anyone, "", false, "", AnsInProgress, KindClaim, "", false,
		"another execution holds it (or its contradiction waits for a person): do nothing"},
	{anyDone, ActClaim, anyone, "", false, "", AnsDuplicate, KindClaim, "", false,
		"it happened: do nothing"},
	{StCancelled, ActClaim, anyone, "", false, "", AnsCancelled, KindClaim, "", false,
		"a person said never to act on it"},

	// Outcome reports.
	{StNew, anyOutcome, anyone, "", false, "", AnsNotFound, "", "", false,
		"no such entry"},
	{StContradicted, anyOutcome, holderOrRe, "", false, "", AnsUnchanged, "", "", false,
		"its contradiction of a person's resolution is kept: a person decides"},
	{StProcessing, ActUnknown, holderOrRe, "", true, ReviewUnknown, AnsChanged, KindOutcome, AlertUnknown, false,
		"a timeout after sending: it stays processing and waits for a person"},
	{StProcessing, anyOutcome, holderOrRe, nextOutcome, true, clearReview, AnsChanged, KindOutcome, "", true,
		"the holder (or a Retry of it) settles it"},
	{anyProcessing, doneOrUnknown, anyone, "", false, ReviewNotHolder, AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted: a person looks"},
	{anyProcessing, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", true,
		"a stray failed changes no risk"},
	{StDoneByPerson, failedOrUnknown, holderOrRe, "", false, "", AnsConflict, KindContradiction, AlertContradiction, false,
		"the holder contradicts a person's done: the order the person believed in may not exist"},
	{anyDone, ActDone, holderish, "", false, "", AnsUnchanged, "", "", false,
		"the same outcome again"},
	{anyDone, anyOutcome, holderOrRe, "", false, "", AnsConflict, "", "", false,
		"done is final"},
	{anyDone, doneOrUnknown, anyone, "", false, "", AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted: a second order may exist"},
	{anyDone, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", true,
		"a stray failed changes no risk"},
	{anyFailed, ActUnknown, WhoRetry, StatusProcessing, true, ReviewUnknown, AnsChanged, KindOutcome, AlertUnknown, false,
		"a Retry of the holder acted again and cannot tell"},
	{anyFailed, anyOutcome, WhoRetry, nextOutcome, true, clearReview, AnsChanged, KindOutcome, "", true,
		"a Retry of the holder acted again: its outcome settles it"},
	{StFailedByPerson, doneOrUnknown, holderish, StatusProcessing, false, ReviewContradiction, AnsChanged, KindContradiction,
		AlertContradiction, false,
		"the holder contradicts a person's failed: the CRM may have the order; it waits for a person again"},
	{anyFailed, ActFailed, holderish, "", false, "", AnsUnchanged, "", "", false,
		"the same outcome again"},
	{anyFailed, anyOutcome, holderish, "", false, "", AnsConflict, "", "", false,
		"failed is left only by a new claim or a Retry"},
	{anyFailed, doneOrUnknown, anyone, "", false, "", AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted"},
	{anyFailed, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", true,
		"a stray failed changes no risk"},
	{StCancelled, doneOrUnknown, holderOrRe, "", false, "", AnsUnchanged, KindContradiction, AlertContradiction, false,
		"the holder acted on an event a person cancelled: kept as a contradiction"},
	{StCancelled, ActFailed, holderOrRe, "", false, "", AnsUnchanged, "", "", false,
		"nothing happened, as the person wanted"},
	{StCancelled, doneOrUnknown, anyone, "", false, "", AnsNotHolder, KindNotHolder, AlertNotHolder, false,
		"a second execution may have acted"},
	{StCancelled, ActFailed, anyone, "", false, "", AnsNotHolder, KindNotHolder, "", false,
		"a stray failed changes no risk"},

	// Errors n8n reports (Error Trigger payloads, hooks, reconciliation).
	{anyProcessing, ActError, holderOrRe, "", false, ReviewError, AnsRecorded, KindError, AlertExecutionError, false,
		"the holder's run failed: the outcome is unknown, a person looks"},
	{anyProcessing, ActError, anyone, "", false, "", AnsRecorded, KindError, "", false,
		"another execution's error says nothing of this entry's outcome"},
	{anyState, ActError, anyone, "", false, "", AnsRecorded, KindError, "", true,
		"a settled entry: news for the people watching it"},

	// The stale detector.
	{StProcessing, ActStale, WhoDetector, "", false, "", AnsRecorded, KindStale, AlertStale, false,
		"processing too long without an outcome"},

	// People.
	{anyProcessing, ActResolveDone, WhoPerson, StatusDone, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person found the order"},
	{anyProcessing, ActResolveFailed, WhoPerson, StatusFailed, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person found no order: the next delivery may act"},
	{StCancelled, ActCancel, WhoPerson, "", false, "", AnsUnchanged, "", "", false,
		"cancelled already"},
	{anyDone, ActCancel, WhoPerson, "", false, "", AnsConflict, "", "", false,
		"done is final"},
	{anyProcessing, ActCancel, WhoPerson, StatusCancelled, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person says never to act on it"},
	{anyFailed, ActCancel, WhoPerson, StatusCancelled, false, clearReview, AnsChanged, KindResolution, "", true,
		"a person says never to act on it"},
	{anyState, anyResolve, WhoPerson, "", false, "", AnsConflict, "", "", false,
		"only a processing entry is resolved"},
	{anyFailed, ActRetry, WhoPerson, "", false, "", AnsChanged, KindRetry, "", true,
		"a person asks n8n to retry the failed execution: written first, so a form shown before it is stale; the Retry's report settles it"},
	{anyState, ActRetry, WhoPerson, "", false, "", AnsConflict, "", "", false,
		"only a failed entry is retried: a retry of a processing, done or cancelled entry is never sent"},
	{anyState, ActLookup, WhoPerson, "", false, "", AnsRecorded, KindLookup, "", false,
		"a person looked the order up in the CRM: written down, the entry and its version unchanged"},
}

// matches reports whether a row is for a state, an act and who.
func (r Row) matches(s State, a Act, w Who) bool {
	return r.State.matches(s) && r.Act.matches(a) && r.Who.matches(w)
}

func (p State) matches(s State) bool {
	switch p {
	case anyState:
		return s != StNew
	case anyProcessing:
		return s == StProcessing || s == StContradicted
	case anyDone:
		return s == StDone || s == StDoneByPerson
	case anyFailed:
		return s == StFailed || s == StFailedByPerson
	}
	return p == s
}

func (p Act) matches(a Act) bool {
	switch p {
	case anyAct:
		return true
	case anyOutcome:
		return a == ActDone || a == ActFailed || a == ActUnknown
	case doneOrUnknown:
		return a == ActDone || a == ActUnknown
	case failedOrUnknown:
		return a == ActFailed || a == ActUnknown
	case anyResolve:
		return a == ActResolveDone || a == ActResolveFailed
	}
	return p == a
}

func (p Who) matches(w Who) bool {
	switch p {
	case anyone:
		return true
	case holderish:
		return w == WhoHolder || w == WhoUnproven
	case holderOrRe:
		return w == WhoHolder || w == WhoUnproven || w == WhoRetry
	}
	return p == w
}

// StateOf is an entry's state as the table reads it.
func StateOf(e *Entry) State {
	switch {
	case e == nil || !e.Stored && e.Status == "":
		return StNew
	case e.Status == StatusProcessing && e.Review == ReviewContradiction:
		return StContradicted
	case e.Status == StatusDone && e.ResolvedBy != "":
		return StDoneByPerson
	case e.Status == StatusFailed && e.ResolvedBy != "":
		return StFailedByPerson
	}
	return State(e.Status)
}

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

// decide finds the first row of Table that matches; a combination the
// table lacks is a bug, not an answer.
func (d *Decider) decide(e *Entry, a Act, w Who) Row {
	s := StateOf(e)
	for _, r := range Table {
		if r.matches(s, a, w) {
			return r
		}
	}
	panic(fmt.Sprintf("audit: no row for %s × %s × %s", s, a, w))
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
