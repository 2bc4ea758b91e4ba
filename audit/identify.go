package audit

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// N8NWord is what n8n's public API said of an execution, asked before its
// request was queued, outside any transaction.
type N8NWord struct {
	Asked bool // the API was asked, whatever it answered
	Err   error
	Self  N8NExecution
	// Ancestors are the executions it retries, nearest first, as n8n
	// answered when asked about each.
	Ancestors []N8NExecution
}

func (w *N8NWord) ok() bool { return w != nil && w.Asked && w.Err == nil }

// Sighting is what a request says of the execution it comes from.
type Sighting struct {
	Kind         string // SeenClaim, SeenOutcome, SeenError, SeenHookStart, SeenHookEnd
	ID           string // n8n's id, qualified with its instance
	WorkflowID   string
	WorkflowName string
	Mode         string
	Stamp        string
	// StartedAt is n8n's start time of the execution, from its hooks; Status
	// n8n's status at an end; RetryOf, the lineage the hooks gave (n8n's
	// word). ClaimedRetryOf is lineage a client or a payload reported,
	// which grants nothing.
	StartedAt      time.Time
	Status         string
	RetryOf        string
	ClaimedRetryOf string
	URL            string
	Note           string
	Word           *N8NWord
}

// Identity is who a request's execution is, as the service keeps it.
type Identity struct {
	ID    string   // the service's id (41, or 41~2 for a reused id); "" when refused
	Chain []string // ID and what it retries, nearest first, by n8n's word or a replayed stamp
	// Proven: its run stamp, or n8n's API asked just now, shows that it is
	// the execution the service keeps under ID.
	Proven  bool
	Reset   string // why the id names a new execution, when it does
	Refused string // why it is refused: another execution the service cannot tell apart
	Note    string // what n8n said, or why the service could not tell
}

// retries reports whether the identity retries id (at any depth).
func (i Identity) retries(id string) bool {
	for _, c := range i.Chain[min(1, len(i.Chain)):] {
		if c == id {
			return true
		}
	}
	return false
}

// Clock tolerances: n8n's clock and the service's may differ by this much
// (clockSkew); two reports of one start by n8n itself differ by less than
// startJitter (its hooks and its database take their times a few
// milliseconds apart).
const (
	clockSkew   = 5 * time.Second
	startJitter = time.Second
	// stampSkew is how much earlier than its stamp says an execution may
	// have been seen: its first node runs within seconds of its start, and
	// n8n's clock may be a little off.
	stampSkew = 30 * time.Second
)

// identify finds, records and returns the execution a sighting is of.
// What n8n said decides first (its API asked now, its hooks' start time),
// then the run stamp, then what the service knows: an execution n8n said
// finished presents nothing again, one unseen for longer than maxRun is
// over (unless n8n said it waits). A new execution reusing the id is kept
// as the id's next incarnation, and people hear once per incarnation that
// n8n's ids started again.
func (d *Decider) identify(s Sighting) Identity {
	if N8NID(s.ID) != s.ID {
		return Identity{Refused: fmt.Sprintf("execution id %s is spelled like one the service makes (…~n): it names no execution of n8n's", s.ID)}
	}
	var x *Exec // the execution that presents this stamp, superseded or not
	for _, e := range d.snap.Execs {
		if s.Stamp != "" && e.N8NID == s.ID && e.Stamp == s.Stamp {
			x = e
		}
	}
	k := d.snap.current(s.ID)
	verdict, why, proven := sameExecution, "", true
	if x == nil {
		if verdict, why, proven = d.judge(k, s); verdict == otherExecution {
			return Identity{Refused: why} // nothing recorded
		}
	}
	if s.Word.ok() {
		for i := len(s.Word.Ancestors) - 1; i >= 0; i-- {
			d.recordAncestor(s.Word.Ancestors[i])
		}
	}
	switch {
	case x != nil:
		d.see(x, s)
		return d.lineage(x, s, Identity{ID: x.ID, Proven: true})
	case verdict == newExecution:
		x := d.incarnate(s, k, why)
		return d.lineage(x, s, Identity{ID: x.ID, Proven: s.Stamp != "" || s.Word.ok(), Reset: x.Note})
	case verdict == firstSighting:
		x := d.incarnate(s, nil, "")
		return d.lineage(x, s, Identity{ID: x.ID, Proven: true})
	}
	d.see(k, s)
	return d.lineage(k, s, Identity{ID: k.ID, Proven: proven})
}

// The verdicts on a sighting of a known id.
const (
	sameExecution  = iota
	firstSighting  // the service knows no execution by the id
	newExecution   // another execution reusing the id
	otherExecution // another, and nothing says the known one is over: refused
)

// judge decides whether a sighting is of k, the execution the service
// keeps under the id now, and whether that is proven.
func (d *Decider) judge(k *Exec, s Sighting) (verdict int, why string, proven bool) {
	if k == nil {
		return firstSighting, "", true
	}
	id := N8NID(k.ID)
	started := func(at time.Time) string { return at.UTC().Format(time.RFC3339) }
	if s.Word.ok() {
		w := s.Word.Self
		switch {
		case w.WorkflowID != "" && s.WorkflowID != "" && w.WorkflowID != s.WorkflowID:
			return otherExecution, fmt.Sprintf("execution %s of workflow %s is not the execution %s the service knows "+
				"(n8n says it runs workflow %s): a second n8n sharing ids, or one whose database was reset; nothing "+
				"was recorded", id, s.WorkflowID, id, w.WorkflowID), true
		case !w.StartedAt.IsZero() && !k.StartedAt.IsZero() && absDuration(w.StartedAt.Sub(k.StartedAt)) > startJitter:
			return newExecution, fmt.Sprintf("n8n says execution %s started at %s; the one the service knows started at %s",
				id, started(w.StartedAt), started(k.StartedAt)), true
		case !w.StartedAt.IsZero() && k.StartedAt.IsZero() && w.StartedAt.After(k.FirstSeen.Add(clockSkew)):
			return newExecution, fmt.Sprintf("n8n says execution %s started at %s, after the service first saw that id (%s)",
				id, started(w.StartedAt), started(k.FirstSeen)), true
		case k.RetryOf != "" && N8NID(k.RetryOf) != d.qualify(w.RetryOf, s.ID):
			return newExecution, fmt.Sprintf("n8n says execution %s retries %s; the one the service knows retries %s",
				id, cmp.Or(d.qualify(w.RetryOf, s.ID), "nothing"), N8NID(k.RetryOf)), true
		}
		if s.Stamp == "" || k.Stamp == "" || k.Stamp == s.Stamp {
			return sameExecution, "", !w.StartedAt.IsZero()
		}
	}
	ownStamp := s.Stamp != "" && StampMaker(s.Stamp, s.ID) == s.ID // made by this run: it is no Retry
	switch {
	case s.Stamp != "" && k.Stamp != "" && s.Stamp != k.Stamp:
		return newExecution, fmt.Sprintf("execution %s presents another run stamp than the one the service knows (%s)",
			id, k.Stamp), true
	case ownStamp && k.Stamp == "" && !StampTime(s.Stamp).IsZero() && k.FirstSeen.Before(StampTime(s.Stamp).Add(-stampSkew)):
		return newExecution, fmt.Sprintf("its run stamp says execution %s began at %s; the service saw that id before, "+
			"at %s", id, started(StampTime(s.Stamp)), started(k.FirstSeen)), true
	case ownStamp && k.Stamp == "" && k.RetryOf != "":
		return newExecution, fmt.Sprintf("execution %s made its own run stamp, so it is no Retry; n8n said the one the "+
			"service knows retries %s", id, N8NID(k.RetryOf)), true
	case k.Waiting() && !s.StartedAt.IsZero() && !s.StartedAt.Before(k.StartedAt.Add(-startJitter)):
		// A waiting execution resumes under its id, perhaps with its
		// resumption's start time.
		return sameExecution, "", false
	case !s.StartedAt.IsZero() && !k.StartedAt.IsZero():
		if absDuration(s.StartedAt.Sub(k.StartedAt)) > startJitter {
			return newExecution, fmt.Sprintf("n8n says execution %s started at %s; the one the service knows started at %s",
				id, started(s.StartedAt), started(k.StartedAt)), true
		}
		return sameExecution, "", false // the same start: a late report of it, whatever came before
	case !s.StartedAt.IsZero() && s.StartedAt.After(k.FirstSeen.Add(clockSkew)):
		return newExecution, fmt.Sprintf("n8n says execution %s started at %s, after the service first saw that id (%s)",
			id, started(s.StartedAt), started(k.FirstSeen)), true
	case s.WorkflowID != "" && k.WorkflowID != "" && s.WorkflowID != k.WorkflowID && s.Stamp != "":
		return newExecution, fmt.Sprintf("execution %s of workflow %s presents a run stamp of its own; the one the service "+
			"knows ran workflow %s", id, s.WorkflowID, k.WorkflowID), true
	case s.WorkflowID != "" && k.WorkflowID != "" && s.WorkflowID != k.WorkflowID:
		return otherExecution, fmt.Sprintf("execution %s of workflow %s is not the execution %s the service knows "+
			"(workflow %s): a second n8n sharing ids, or one whose database was reset; nothing was recorded",
			id, s.WorkflowID, id, k.WorkflowID), false
	case k.Waiting():
		// A Wait node's pause: it resumes under its id, however long.
	case !k.EndedAt.IsZero() && (s.Kind == SeenClaim || s.Kind == SeenOutcome || s.Kind == SeenHookStart):
		return newExecution, fmt.Sprintf("n8n said execution %s had finished; a finished execution presents nothing again", id), true
	case d.rules.MaxRun > 0 && d.now.Sub(k.LastSeen) > d.rules.MaxRun:
		return newExecution, fmt.Sprintf("execution %s was last seen %s ago, longer than an execution runs (%s)",
			id, HumanDuration(d.now.Sub(k.LastSeen), " "), HumanDuration(d.rules.MaxRun, " ")), false
	}
	return sameExecution, "", false
}

// see records what a sighting adds to the execution it is of.
func (d *Decider) see(x *Exec, s Sighting) {
	x.WorkflowID, x.WorkflowName = cmp.Or(x.WorkflowID, s.WorkflowID), cmp.Or(s.WorkflowName, x.WorkflowName)
	x.URL, x.Stamp = cmp.Or(x.URL, s.URL), cmp.Or(x.Stamp, s.Stamp)
	x.ClaimedRetryOf = cmp.Or(x.ClaimedRetryOf, s.ClaimedRetryOf)
	if s.Mode != "" && (x.Mode == "" || s.Kind == SeenHookStart || s.Kind == SeenHookEnd) {
		x.Mode = s.Mode
	}
	if x.StartedAt.IsZero() && !s.StartedAt.IsZero() {
		x.StartedAt = s.StartedAt
	}
	if s.Word.ok() {
		w := s.Word.Self
		x.Mode, x.CheckedAt = cmp.Or(w.Mode, x.Mode), d.now
		if x.StartedAt.IsZero() {
			x.StartedAt = w.StartedAt
		}
		if finished(w.Status) && x.EndedAt.IsZero() {
			x.EndedAt = d.now
		}
		x.N8NStatus = cmp.Or(w.Status, x.N8NStatus)
	}
	if s.Kind == SeenHookEnd {
		x.N8NStatus = s.Status
		if finished(s.Status) && x.EndedAt.IsZero() {
			x.EndedAt = d.now
		}
	}
	if s.Kind == SeenHookStart && x.N8NStatus == "waiting" {
		x.N8NStatus = "running"
	}
	x.Note = cmp.Or(s.Note, x.Note)
	x.LastSeen, x.Dirty = d.now, true
}

// incarnate records a new execution under the id s names: its first, or
// the next after k, which it supersedes (why says how the service knows).
func (d *Decider) incarnate(s Sighting, k *Exec, why string) *Exec {
	x := &Exec{ID: s.ID, N8NID: s.ID, Incarnation: 1, FirstSeen: d.now}
	if k != nil {
		x.Incarnation = k.Incarnation + 1
		x.ID = IncarnationID(s.ID, x.Incarnation)
		k.Superseded, k.Dirty = true, true
		x.Note = fmt.Sprintf("n8n's execution id %s names a new execution (kept as %s), not the one the service knew (now %s): %s",
			s.ID, x.ID, k.ID, why)
		d.idReset(s.ID, k.ID, x, why)
	}
	x.Root = x.ID
	d.snap.Execs[x.ID] = x
	d.see(x, s)
	return x
}

// recordAncestor records an execution n8n's API told of while walking up
// a Retry's chain.
func (d *Decider) recordAncestor(a N8NExecution) {
	s := Sighting{Kind: "api", ID: a.ID, WorkflowID: a.WorkflowID, Mode: a.Mode, Status: a.Status,
		Word: &N8NWord{Asked: true, Self: a}}
	k := d.snap.current(a.ID)
	x := k
	if verdict, why, _ := d.judge(k, s); verdict == firstSighting || verdict == newExecution {
		x = d.incarnate(s, k, why)
	} else {
		d.see(x, s)
	}
	d.setRetryOf(x, d.qualify(a.RetryOf, a.ID))
}

// lineage sets what an execution retries, by n8n's word (its API, its
// hooks) or by the stamp it replays, and returns id with its chain. A
// replay by a person's run in the editor grants nothing: it is recorded as
// reported lineage.
func (d *Decider) lineage(x *Exec, s Sighting, id Identity) Identity {
	switch {
	case s.Word.ok():
		d.setRetryOf(x, d.qualify(s.Word.Self.RetryOf, s.ID))
		if s.Word.Self.RetryOf == "" || s.Word.Self.Mode != "retry" {
			id.Note = fmt.Sprintf("n8n: execution %s has mode %q, it is no retry", N8NID(x.ID), s.Word.Self.Mode)
		}
	case s.RetryOf != "":
		d.setRetryOf(x, s.RetryOf)
	}
	maker := StampMaker(s.Stamp, s.ID)
	if x.RetryOf == "" && maker != "" && maker != s.ID {
		if ManualMode(cmp.Or(s.Mode, x.Mode)) && !s.Word.ok() {
			x.ClaimedRetryOf = cmp.Or(x.ClaimedRetryOf, maker)
			id.Note = joinNote(id.Note, fmt.Sprintf("a run in the editor (mode %s) replaying the data of execution %s: it grants nothing",
				cmp.Or(s.Mode, x.Mode), maker))
		} else if !ManualMode(cmp.Or(s.Mode, x.Mode)) {
			m := d.stampMaker(s.Stamp, maker)
			d.setRetryOf(x, m.ID)
			id.Note = joinNote(id.Note, fmt.Sprintf("its run stamp is execution %s's: a Retry of it", N8NID(m.ID)))
		}
	}
	if x.RetryOf == "" && x.ClaimedRetryOf != "" && x.Root == x.ID && N8NID(x.ClaimedRetryOf) != x.N8NID {
		// Reported lineage roots the execution under the one it names, so
		// that its errors link to that one's event for people to see; it
		// grants nothing (the chain follows n8n's word only).
		root := x.ClaimedRetryOf
		if p := d.snap.current(x.ClaimedRetryOf); p != nil {
			root = cmp.Or(p.Root, p.ID)
		}
		if root != x.ID {
			d.plan.ReRoots = append(d.plan.ReRoots, ReRoot{From: x.Root, To: root})
			x.Root, x.Dirty = root, true
		}
	}
	switch {
	case s.ClaimedRetryOf == "" || x.RetryOf != "" && N8NID(x.RetryOf) == s.ClaimedRetryOf:
	case s.Word.ok():
		id.Note = joinNote(id.Note, fmt.Sprintf("the retry_of %s it sent is not n8n's", s.ClaimedRetryOf))
	default:
		id.Note = joinNote(id.Note, fmt.Sprintf("retry_of %s not verified: configure the n8n API "+
			"(RETRYAUDIT_N8N_API_URL) or n8n's execution hooks to have retries recognised", s.ClaimedRetryOf))
	}
	if s.Word != nil && s.Word.Asked && s.Word.Err != nil {
		id.Note = joinNote(id.Note, fmt.Sprintf("n8n could not say whether execution %s is a retry (%v): treated as a redelivery",
			N8NID(x.ID), s.Word.Err))
	}
	id.Chain = d.snap.chain(x.ID)
	return id
}

// stampMaker returns the execution that made a stamp: the first that
// presented it, else the one the service keeps under the id it names (a
// placeholder recorded now when it knows none).
func (d *Decider) stampMaker(stamp, maker string) *Exec {
	if m := d.snap.byStamp(stamp); m != nil && m.N8NID == maker {
		return m
	}
	if m := d.snap.current(maker); m != nil {
		return m
	}
	x := &Exec{ID: maker, N8NID: maker, Incarnation: 1, Root: maker, Stamp: stamp, FirstSeen: d.now, LastSeen: d.now,
		Note: "known only from the run stamp its Retries replay", Dirty: true}
	d.snap.Execs[x.ID] = x
	return x
}

// setRetryOf records lineage n8n confirmed: the first one stays (n8n never
// changes it), and the execution takes its parent's root.
func (d *Decider) setRetryOf(x *Exec, parent string) {
	if parent == "" || x.RetryOf != "" || N8NID(parent) == x.N8NID {
		return
	}
	if p := d.snap.current(N8NID(parent)); p != nil {
		parent = p.ID
	}
	x.RetryOf, x.Dirty = parent, true
	root := parent
	if p := d.snap.Execs[parent]; p != nil {
		root = cmp.Or(p.Root, p.ID)
	}
	if x.Root != root {
		d.plan.ReRoots = append(d.plan.ReRoots, ReRoot{From: x.Root, To: root})
		x.Root = root
	}
}

// qualify qualifies an id n8n gave with the instance of like.
func (d *Decider) qualify(id, like string) string {
	if id == "" || strings.Contains(id, InstanceSep) {
		return id
	}
	if i := strings.LastIndex(like, InstanceSep); i >= 0 {
		return id + like[i:]
	}
	return id
}

// finished reports a status n8n gives an execution that will not run again
// under its id.
func finished(status string) bool {
	switch status {
	case "success", "error", "crashed", "canceled":
		return true
	}
	return false
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
