package audit

import (
	"cmp"
	"slices"
)

// Plan is what a batch's decisions write, besides the entries, executions
// and presences they changed: the store writes it in the batch's
// transaction, in one statement a table where it can.
type Plan struct {
	Entries   []*Entry
	Execs     []*Exec
	Presences []*Presence
	Lines     []Line
	Notices   []Notice
	Groups    []GroupNotice
	Errors    []ErrorWrite
	Links     []ErrorLink
	ReRoots   []ReRoot
	Counters  map[CounterKey]int
	Waits     []ReviewWait
}

// Line is a history line to write. ErrorKey names an error this batch
// records, whose id the store fills in; Version is the event's version
// after the line.
type Line struct {
	HistoryLine
	ErrorKey string
	Version  int64
}

// Notice is an outbox row to write: an alert that opens a thread, a reply
// in it, or a refresh of its first message. ErrorKey as Line's.
type Notice struct {
	Thread   string
	Role     string
	Alert    Alert
	ErrorKey string
	Due      int64 // seconds after now when it may go (0: at once)
}

// GroupNotice is an alert about what belongs to no event (an error linked
// to nothing, n8n's ids starting again), grouped by kind, workflow and
// node: the store opens the group's thread or counts it there.
type GroupNotice struct {
	Kind, WorkflowID, Node string
	Alert                  Alert
	ErrorKey               string
	Due                    int64
	// Count: when the group's thread is open, the notice is counted in it
	// (a reply); otherwise it is dropped (one alert per group and repeat
	// interval).
	Count bool
}

// ErrorWrite is an error to record (Merge nil), or the record of one
// recorded before with what a second report adds (Merge set).
type ErrorWrite struct {
	Report N8NErrorReport
	Root   string
	Link   *EventKey
	Merge  *N8NErrorRecord
}

// ErrorLink links an error recorded before its execution claimed to the
// event the claim is about.
type ErrorLink struct {
	ID    int64    `json:"id"`
	Event EventKey `json:"event"`
}

// ReRoot moves the executions and errors rooted at From under To: lineage
// learned after they were recorded.
type ReRoot struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// CounterKey names one counter of the overview.
type CounterKey struct {
	Source, WorkflowID, Metric string
}

// ReviewWait is how long an entry waited for a person, recorded when a
// person resolves it.
type ReviewWait struct {
	Source  string  `json:"source"`
	Seconds float64 `json:"seconds"`
}

// sort puts the rows in key order, so that two batches lock them in the
// same order.
func (p *Plan) sort() {
	slices.SortFunc(p.Entries, func(a, b *Entry) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.EventID, b.EventID), cmp.Compare(a.Item, b.Item))
	})
	slices.SortFunc(p.Execs, func(a, b *Exec) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(p.Presences, func(a, b *Presence) int {
		return cmp.Or(cmp.Compare(a.Key.Source, b.Key.Source), cmp.Compare(a.Key.EventID, b.Key.EventID),
			cmp.Compare(a.ExecutionID, b.ExecutionID))
	})
}

// Wakes reports whether the plan writes an outbox row: the worker should
// look once it commits.
func (p *Plan) Wakes() bool { return len(p.Notices) > 0 || len(p.Groups) > 0 }
