package audit

import (
	"database/sql"
	"encoding/base64"
	"strings"
	"time"
)

// Event is a ledger entry: one row of webhook_events.
type Event struct {
	Source            string       `db:"source"`
	EventID           string       `db:"event_id"`
	Status            Status       `db:"status"`
	CreatedAt         time.Time    `db:"created_at"`
	UpdatedAt         time.Time    `db:"updated_at"` // when it entered its status
	LastSeenAt        time.Time    `db:"last_seen_at"`
	HolderExecutionID string       `db:"holder_execution_id"`
	Deliveries        int          `db:"deliveries"`
	ItemCount         int          `db:"item_count"`
	Fingerprint       string       `db:"fingerprint"`
	CRMRef            string       `db:"crm_ref"`
	ReviewReason      string       `db:"review_reason"`
	StaleAlertedAt    sql.NullTime `db:"stale_alerted_at"`
	// Version changes with every transition: a person's form carries it.
	Version int64 `db:"version"`
	// ResolvedBy is the person whose resolution settled it last.
	ResolvedBy  string `db:"resolved_by"`
	NeedsReview bool   `db:"needs_review"`
	// LastNews is the latest error, outcome or stale note, read for the
	// review queue only.
	LastNews string `db:"last_news"`
}

// Item is one item of a multi-item event.
type Item struct {
	Item              string    `db:"item"`
	Status            Status    `db:"status"`
	HolderExecutionID string    `db:"holder_execution_id"`
	CRMRef            string    `db:"crm_ref"`
	ReviewReason      string    `db:"review_reason"`
	CreatedAt         time.Time `db:"created_at"`
	UpdatedAt         time.Time `db:"updated_at"`
	Version           int64     `db:"version"`
	ResolvedBy        string    `db:"resolved_by"`
}

// EventExecution is an execution that touched an event, and how.
type EventExecution struct {
	Execution
	Role     string `db:"role"`
	Delivery string `db:"delivery"`
	Acted    bool   `db:"acted"` // it was told to process the event at least once
	// DeliveryID and Class: the sender's delivery id it came with, and why
	// it presented a known key.
	DeliveryID string    `db:"delivery_id"`
	Class      string    `db:"class"`
	TouchedAt  time.Time `db:"touched_at"`
}

// EventDetail is everything known about one event.
type EventDetail struct {
	Event
	Items []Item
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
