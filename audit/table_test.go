package audit

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

var (
	t0       = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	entryKey = EntryKey{Source: "shop", EventID: "e1"}
)

// The concrete states, acts and who the table's patterns stand for.
var (
	allStates = []State{StNew, StProcessing, StContradicted, StDone, StDoneByPerson, StFailed, StFailedByPerson, StCancelled}
	allActs   = []Act{ActClaim, ActDone, ActFailed, ActUnknown, ActError, ActStale, ActResolveDone, ActResolveFailed, ActCancel, ActLookup, ActRetry}
	allWho    = []Who{WhoHolder, WhoUnproven, WhoRetry, WhoOther, WhoPerson, WhoDetector}
)

// met reports whether the ledger can meet a combination: what comes from an
// execution comes from one of the four kinds of execution, a resolution
// from a person, a stale check from the detector; an error is of the
// holder, a Retry of it, or another (never "unproven": n8n said it); an
// entry that does not exist meets claims and reports only.
func met(s State, a Act, w Who) bool {
	execution := w == WhoHolder || w == WhoUnproven || w == WhoRetry || w == WhoOther
	switch a {
	case ActClaim, ActDone, ActFailed, ActUnknown:
		return execution && (s != StNew || w == WhoOther)
	case ActError:
		return s != StNew && (w == WhoHolder || w == WhoRetry || w == WhoOther)
	case ActStale:
		return s == StProcessing && w == WhoDetector
	}
	return s != StNew && w == WhoPerson
}

// TestEveryCombinationHasARow: the table decides every combination the
// ledger meets.
func TestEveryCombinationHasARow(t *testing.T) {
	for _, s := range allStates {
		for _, a := range allActs {
			for _, w := range allWho {
				if _, ok := rowFor(s, a, w); met(s, a, w) && !ok {
					t.Errorf("no row for %s × %s × %s", s, a, w)
				}
			}
		}
	}
}

// TestTableRows: every row of the table is the first match of at least one
// combination the ledger meets, and for each such cell the Decider does
// what the row says: the answer, the status, the holder, the review, the
// history line and the alert.
func TestTableRows(t *testing.T) {
	hit := make([]int, len(Table))
	for _, s := range allStates {
		for _, a := range allActs {
			for _, w := range allWho {
				row, ok := rowFor(s, a, w)
				if !ok || !met(s, a, w) {
					continue
				}
				i := rowIndex(row)
				hit[i]++
				t.Run(fmt.Sprintf("row %d: %s × %s × %s", i, s, a, w), func(t *testing.T) { checkCell(t, s, a, w, row) })
			}
		}
	}
	for i, n := range hit {
		if n == 0 {
			r := Table[i]
			t.Errorf("row %d (%s × %s × %s: %s) is never the first match: a dead row", i, r.State, r.Act, r.Who, r.Why)
		}
	}
}

func rowIndex(r Row) int {
	for i := range Table {
		if Table[i] == r {
			return i
		}
	}
	return -1
}

// The executions of a cell: the holder 40 with its stamp; 40 without it
// (unproven); 45, an n8n Retry of 40 replaying its stamp; 41, another.
const (
	stamp40 = "40:1764925200000:a"
	stamp41 = "41:1764925201000:b"
)

// cellSnapshot is an entry in state s, held by 40, and what the ledger
// knows of 40, 41 and 45.
func cellSnapshot(s State) *Snapshot {
	snap := NewSnapshot()
	snap.Execs["40"] = &Exec{ID: "40", N8NID: "40", Incarnation: 1, WorkflowID: "wf", Root: "40", Stamp: stamp40,
		FirstSeen: t0, LastSeen: t0, Stored: true}
	snap.Execs["45"] = &Exec{ID: "45", N8NID: "45", Incarnation: 1, WorkflowID: "wf", Root: "40", RetryOf: "40",
		Mode: "retry", FirstSeen: t0, LastSeen: t0, Stored: true}
	if s == StNew {
		return snap
	}
	e := &Entry{EntryKey: entryKey, Status: StatusProcessing, Holder: "40", Version: 3, ReadVersion: 3, Since: t0,
		Created: t0, Deliveries: 1, Stored: true}
	switch s {
	case StContradicted:
		e.Review = ReviewContradiction
	case StDone, StDoneByPerson:
		e.Status = StatusDone
	case StFailed, StFailedByPerson:
		e.Status = StatusFailed
	case StCancelled:
		e.Status, e.ResolvedBy = StatusCancelled, "ann"
	}
	if s == StDoneByPerson || s == StFailedByPerson {
		e.ResolvedBy = "ann"
	}
	snap.Entries[entryKey] = e
	snap.AddPresence(Presence{Key: entryKey.Event(), ExecutionID: "40", Role: RoleClaim, Acted: true})
	return snap
}

// actor is the execution id and stamp of who.
func actor(w Who) (id, stamp string) {
	switch w {
	case WhoHolder:
		return "40", stamp40
	case WhoUnproven:
		return "40", ""
	case WhoRetry:
		return "45", stamp40
	}
	return "41", stamp41
}

// act runs one act through the Decider and returns its answer as the
// table names it.
func act(d *Decider, a Act, w Who) Answer {
	id, stamp := actor(w)
	e := d.snap.Entries[entryKey]
	switch a {
	case ActClaim:
		res, err := d.Claim(ClaimRequest{Source: "shop", EventID: "e1", ExecutionID: id, WorkflowID: "wf",
			RunStamp: stamp}, nil)
		if err != nil {
			return Answer("error: " + err.Error())
		}
		return Answer(res.Decision)
	case ActDone, ActFailed, ActUnknown:
		res, err := d.Outcome(OutcomeRequest{Source: "shop", EventID: "e1", Outcome: Outcome(a), ExecutionID: id,
			WorkflowID: "wf", RunStamp: stamp}, nil)
		return answerOf(err, res.Changed)
	case ActError:
		if w == WhoOther { // it presented the key and was told to wait
			d.snap.AddPresence(Presence{Key: entryKey.Event(), ExecutionID: id, Role: RoleClaim})
		}
		d.Error(N8NErrorReport{Kind: N8NErrorExecution, DedupeKey: "exec:" + id, ExecutionID: id, WorkflowID: "wf",
			Message: "boom"}, nil)
		return AnsRecorded
	case ActLookup:
		if err := d.Lookup(&LookupRecord{Source: "shop", EventID: "e1", Actor: "bob", Via: ViaPage, Result: LookupFound,
			CRMRef: "CRM-1"}); err != nil {
			return Answer("error: " + err.Error())
		}
		return AnsRecorded
	case ActStale:
		if d.Stale(entryKey.Event(), "40", t0.Add(time.Hour)) {
			return AnsRecorded
		}
		return "nothing"
	}
	if a == ActRetry {
		before := *e
		err := d.Retry(RetryRequest{Source: "shop", EventID: "e1", Version: e.Version, Actor: "bob", Via: "page",
			ExecutionID: "40"})
		return answerOf(err, e.Version != before.Version)
	}
	to := map[Act]Status{ActResolveDone: StatusDone, ActResolveFailed: StatusFailed, ActCancel: StatusCancelled}[a]
	before := *e
	_, err := d.Resolve(ResolveRequest{Source: "shop", EventID: "e1", To: to, Actor: "bob", Note: "looked",
		Version: e.Version, Confirmed: true})
	return answerOf(err, e.Version != before.Version)
}

func answerOf(err error, changed bool) Answer {
	var e *Error
	switch {
	case err == nil && changed:
		return AnsChanged
	case err == nil:
		return AnsUnchanged
	case errors.As(err, &e) && e.Code == CodeNotHolder:
		return AnsNotHolder
	case errors.As(err, &e) && e.Code == CodeConflict:
		return AnsConflict
	case errors.As(err, &e) && e.Code == CodeNotFound:
		return AnsNotFound
	}
	return Answer("error: " + err.Error())
}

func checkCell(t *testing.T, s State, a Act, w Who, row Row) {
	snap := cellSnapshot(s)
	d := NewDecider(snap, t0.Add(2*time.Hour), Rules{MaxRun: 24 * time.Hour, ReviewAfter: 15 * time.Minute})
	before := Entry{}
	if e := snap.Entries[entryKey]; e != nil {
		before = *e
	}
	if got := act(d, a, w); got != row.Answer {
		t.Fatalf("answer %q, want %q (%s)", got, row.Answer, row.Why)
	}
	e := snap.Entries[entryKey]
	if e == nil {
		if row.Next != "" {
			t.Fatalf("no entry, want %s", row.Next)
		}
		return
	}
	want := row.Next
	switch {
	case want == nextOutcome && a == ActUnknown:
		want = StatusProcessing
	case want == nextOutcome:
		want = Status(a)
	case want == "":
		want = before.Status
	}
	if want != "" && e.Status != want {
		t.Errorf("status %s, want %s", e.Status, want)
	}
	id, _ := actor(w)
	if row.Take && e.Holder != id {
		t.Errorf("holder %s, want %s (a takeover)", e.Holder, id)
	}
	if !row.Take && before.Holder != "" && e.Holder != before.Holder {
		t.Errorf("holder %s, want %s kept", e.Holder, before.Holder)
	}
	switch {
	case row.Review == clearReview && e.Review != "":
		t.Errorf("review %q, want none", e.Review)
	case row.Review != "" && row.Review != clearReview && e.Review != row.Review && before.Review == "":
		t.Errorf("review %q, want %q", e.Review, row.Review)
	case row.Review == "" && e.Review != before.Review && !(e.Status != StatusProcessing && e.Review == ""):
		t.Errorf("review %q, want %q kept", e.Review, before.Review)
	}
	changed := e.Status != before.Status || e.Holder != before.Holder || e.Review != before.Review
	if changed && e.Version == before.Version {
		t.Errorf("the entry moved, its version did not (%d)", e.Version)
	}
	p := d.Plan()
	kinds := map[string]bool{}
	for _, l := range p.Lines {
		kinds[l.Kind] = true
	}
	if row.Line != "" && !kinds[row.Line] {
		t.Errorf("lines %v, want one of kind %s", kinds, row.Line)
	}
	alerts := map[string]bool{}
	for _, n := range p.Notices {
		if n.Role != RowRefresh {
			alerts[n.Alert.Kind] = true
		}
	}
	if row.Alert != "" && !alerts[row.Alert] {
		t.Errorf("alerts %v, want %s", alerts, row.Alert)
	}
	if row.Alert == "" && len(alerts) > 0 && !(row.News || alerts[AlertNews]) {
		t.Errorf("alerts %v, want none", alerts)
	}
}

// rowFor returns the first row of Table that matches, as Decider.decide
// finds it; ok is false when none does.
func rowFor(s State, a Act, w Who) (Row, bool) {
	for _, r := range Table {
		if r.matches(s, a, w) {
			return r, true
		}
	}
	return Row{}, false
}
