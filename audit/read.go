package audit

import (
	"encoding/base64"
	"strings"
	"time"
)

// Event is a ledger entry as the pages read it: the entry, and what the
// read adds.
type Event struct {
	Entry
	// NeedsReview: it waits for a person, for its review reason or because
	// it has been processing longer than the review delay (the entry's own
	// NeedsReview knows only the reason).
	NeedsReview bool
	// LastNews is the latest error, outcome or stale note, read for the
	// review queue only.
	LastNews string
}

// EventExecution is an execution that touched an event, and how: its
// presence on the event, first made at TouchedAt.
type EventExecution struct {
	Exec
	Presence  Presence
	TouchedAt time.Time
}

// EventDetail is everything known about one event.
type EventDetail struct {
	Event
	Items []Entry
	// History is one page of the event's lines: the newest ones older than
	// the page's cursor, oldest first. HistoryNext continues before it (0
	// on the last page); HistoryCounts counts every line by kind.
	History       []HistoryLine
	HistoryNext   int64
	HistoryTotal  int
	HistoryCounts map[string]int
	// Refused holds the newest refused reports (not_holder), oldest first,
	// whatever page History shows: a person confirms them.
	Refused []HistoryLine
	// Executions, Errors and Alerts are the first (oldest) MaxListed of
	// each; the totals count them all.
	Executions      []EventExecution
	Errors          []N8NErrorRecord
	Alerts          []OutboxRow
	ExecutionsTotal int
	ErrorsTotal     int
	AlertsTotal     int
}

// HistoryPage selects a page of an event's history.
type HistoryPage struct {
	Before int64 // a HistoryNext; 0 for the newest lines
	Limit  int   // 1 to 500; 0 for 100
}

// MaxListed bounds the executions, errors and alerts read with an event: a
// key redelivered ten thousand times must not make a page of megabytes.
const MaxListed = 200

// EventFilter selects events for a list. Zero values select everything.
type EventFilter struct {
	Source      string
	Status      Status
	NeedsReview bool
	Prefix      string        // of the event id
	Instance    string        // presented by an execution of this n8n instance
	OlderThan   time.Duration // in the current status for at least this long
	Cursor      string        // from the previous page's Next
	Limit       int
}

// EventPage is one page of events, newest activity first.
type EventPage struct {
	Events []Event
	Next   string // the cursor of the next page, empty on the last
}

func DecodeCursor(c string) (time.Time, string, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", "", err
	}
	parts := strings.SplitN(string(raw), "\x00", 3)
	if len(parts) != 3 {
		return time.Time{}, "", "", Errorf(CodeInvalid, "cursor has %d parts", len(parts))
	}
	at, err := time.Parse(time.RFC3339Nano, parts[0])
	return at, parts[1], parts[2], err
}
