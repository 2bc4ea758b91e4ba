package audit

import (
	"slices"
	"time"
)

// EntryKey names one ledger entry: an event, or one item of a multi-item
// event (Item is empty for the event itself).
type EntryKey struct {
	Source  string `db:"source" json:"source"`
	EventID string `db:"event_id" json:"event_id"`
	Item    string `db:"item" json:"item"`
}

// Event returns the key of the event the entry belongs to.
func (k EntryKey) Event() EventKey { return EventKey{Source: k.Source, EventID: k.EventID} }

// Entry is one ledger entry as the store read it under its row lock, and as
// a batch's decisions leave it. Version changes with every transition
// (status, holder, review, CRM reference): a person's form carries the
// version it showed, and is refused once the entry moved on.
type Entry struct {
	EntryKey
	Status  Status
	Holder  string
	Version int64
	Review  string // why it waits for a person; "" when it does not
	CRMRef  string
	// ResolvedBy is the person whose resolution settled it last; "" when
	// an execution's report (or nothing yet) did.
	ResolvedBy string
	Since      time.Time // when it entered its status or was taken over
	// ReviewSince is when it began to wait for its review reason.
	ReviewSince time.Time
	Created     time.Time
	// Alerted: people were told about it (an alert opened its thread);
	// later news goes to that thread. StaleAlertedAt: when the stale
	// detector last alerted about it.
	Alerted        bool
	StaleAlertedAt time.Time
	// The event's own fields (the zero values on an item).
	ItemCount       int
	Deliveries      int
	Fingerprint     string
	FirstWorkflow   string
	LastDeliveryID  string
	LastPresentedAt time.Time
	LastSeen        time.Time
	// Stored: the row exists, with ReadVersion as read under the lock: the
	// write is fenced by it. Dirty: this batch changed it.
	Stored      bool
	ReadVersion int64
	Dirty       bool
}

// NeedsReview reports whether the entry waits for a person.
func (e *Entry) NeedsReview() bool { return e.Status == StatusProcessing && e.Review != "" }

// Exec is an execution as the service keeps it: n8n's id (qualified with
// its instance), the incarnation (a reused id is another execution), what
// n8n said of it, and the run stamp it presents.
type Exec struct {
	ID             string // as the service keeps it: 41, 41~2, 41@staging
	N8NID          string
	Incarnation    int
	WorkflowID     string
	WorkflowName   string
	Mode           string
	RetryOf        string // n8n's word: its API, its hooks, or a replayed stamp
	ClaimedRetryOf string // what a client or a payload said, unconfirmed
	Root           string
	URL            string
	Note           string
	Stamp          string // the run stamp it presents
	StartedAt      time.Time
	EndedAt        time.Time
	CheckedAt      time.Time
	N8NStatus      string
	FirstSeen      time.Time
	LastSeen       time.Time
	Superseded     bool
	// Stored: the row exists; Dirty: this batch changed it.
	Stored bool
	Dirty  bool
}

// Waiting reports an execution n8n said waits (a Wait node): it resumes
// under its id, however long it waits.
func (x *Exec) Waiting() bool { return x.N8NStatus == "waiting" && x.EndedAt.IsZero() }

// Presence is an execution that presented an entry's key (or was linked to
// it by an error or a report): one row of event_executions.
type Presence struct {
	Key         EventKey
	ExecutionID string
	Role        string // claim, report or error
	Delivery    Delivery
	Acted       bool
	DeliveryID  string
	WorkflowID  string
	Class       Class
	Stored      bool
	Dirty       bool
}

// The roles of an execution on an event.
const (
	RoleClaim  = "claim"
	RoleReport = "report"
	RoleError  = "error"
)

// presenceKey names a presence.
type presenceKey struct {
	Event       EventKey
	ExecutionID string
}

// evidenceKey names a report kept as evidence, once per entry, execution,
// kind and outcome.
type evidenceKey struct {
	Entry       EntryKey
	ExecutionID string
	Kind        string
	Outcome     Outcome
}

// PendingError is an error recorded before its execution claimed anything,
// linked to no event yet: the claim links it.
type PendingError struct {
	ID          int64
	ExecutionID string
	Root        string
	Record      N8NErrorRecord
	Linked      bool // a claim of this batch linked it
}

// Snapshot is what the store read under its locks for one batch: the
// entries of its keys (an event and its items), the executions it names
// (every incarnation of their n8n ids, the makers of the stamps presented,
// and their ancestors), which of them presented which events, the evidence
// kept for them, the errors waiting for their claims and the errors the
// batch's reports already have.
type Snapshot struct {
	Entries   map[EntryKey]*Entry
	Execs     map[string]*Exec // by the service's id
	Presences map[presenceKey]*Presence
	// Evidence are the reports kept as evidence: the newest event version
	// a line of each was written at.
	Evidence map[evidenceKey]int64
	Pending  []PendingError
	// Errors are the errors already recorded under the batch's dedupe
	// keys; Events, the events each execution touched (its presences,
	// for the error intake: an execution's entries).
	Errors map[string]N8NErrorRecord
	// Locked are the keys another database session holds: their requests
	// are set aside, never waited for.
	Locked map[EventKey]bool
}

// NewSnapshot returns an empty snapshot, ready to be filled.
func NewSnapshot() *Snapshot {
	return &Snapshot{Entries: map[EntryKey]*Entry{}, Execs: map[string]*Exec{}, Presences: map[presenceKey]*Presence{},
		Evidence: map[evidenceKey]int64{}, Errors: map[string]N8NErrorRecord{}, Locked: map[EventKey]bool{}}
}

// AddPresence records a presence read from the store.
func (s *Snapshot) AddPresence(p Presence) {
	p.Stored = true
	s.Presences[presenceKey{p.Key, p.ExecutionID}] = &p
}

// AddEvidence records a kept report read from the store, written when the
// event was at version.
func (s *Snapshot) AddEvidence(k EntryKey, executionID, kind string, outcome Outcome, version int64) {
	key := evidenceKey{k, executionID, kind, outcome}
	s.Evidence[key] = max(s.Evidence[key], version)
}

// current returns the execution the service keeps now under an n8n id:
// the latest incarnation; nil when it knows none.
func (s *Snapshot) current(n8nID string) *Exec {
	var cur *Exec
	for _, x := range s.Execs {
		if x.N8NID == n8nID && (cur == nil || x.Incarnation > cur.Incarnation) {
			cur = x
		}
	}
	return cur
}

// byStamp returns the first execution that presented a stamp, nil when
// none did.
func (s *Snapshot) byStamp(stamp string) *Exec {
	if stamp == "" {
		return nil
	}
	var first *Exec
	for _, x := range s.Execs {
		if x.Stamp == stamp && (first == nil || x.FirstSeen.Before(first.FirstSeen) ||
			x.FirstSeen.Equal(first.FirstSeen) && x.ID < first.ID) {
			first = x
		}
	}
	return first
}

// chain returns an execution and the ones it retries, nearest first, by
// the lineage n8n confirmed (or a replayed stamp showed), as far as the
// snapshot knows them (at most MaxChain).
func (s *Snapshot) chain(id string) []string {
	out := []string{id}
	for x := s.Execs[id]; x != nil && x.RetryOf != "" && len(out) < MaxChain; x = s.Execs[x.RetryOf] {
		if slices.Contains(out, x.RetryOf) {
			break // a cycle: n8n never makes one
		}
		out = append(out, x.RetryOf)
	}
	return out
}

// events returns the events an execution presented or was linked to, in
// key order.
func (s *Snapshot) events(executionID string) []EventKey {
	var out []EventKey
	for k := range s.Presences {
		if k.ExecutionID == executionID {
			out = append(out, k.Event)
		}
	}
	slices.SortFunc(out, func(a, b EventKey) int {
		if c := compareStrings(a.Source, b.Source); c != 0 {
			return c
		}
		return compareStrings(a.EventID, b.EventID)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MaxChain bounds every walk up a retryOf chain: a person pressing Retry
// fifty times on one execution is already beyond what the pages show.
const MaxChain = 50
