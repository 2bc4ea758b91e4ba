package audit

import (
	"database/sql"
	"time"
)

// EventKey names an event.
type EventKey struct {
	Source  string `db:"source" json:"source"`
	EventID string `db:"event_id" json:"event_id"`
}

// N8NErrorRecord is an error the service received (or found), as kept.
type N8NErrorRecord struct {
	ID               int64
	DedupeKey        string
	ReceivedAt       time.Time
	Kind             string
	ExecutionID      string
	RetryOf          string
	Root             string
	WorkflowID       string
	WorkflowName     string
	Mode             string
	Node             string
	Message          string
	HTTPCode         string
	URL              string
	Payload          string
	PayloadTruncated bool
	PayloadDropped   bool
	Note             string
	LinkedSource     sql.NullString
	LinkedEventID    sql.NullString
}

// Linked returns the event the error belongs to, if any.
func (e N8NErrorRecord) Linked() (EventKey, bool) {
	return EventKey{e.LinkedSource.String, e.LinkedEventID.String}, e.LinkedSource.Valid
}

// N8NErrorResult is the intake's answer.
type N8NErrorResult struct {
	ID          int64
	Kind        string
	Duplicate   bool
	ExecutionID string
	RetryOf     string
	Linked      *EventKey
	// DedupeKey is the key it was recorded under (exec:41~2 for a new
	// execution reusing id 41): the store finds its id by it.
	DedupeKey string
}

// N8NErrorFilter selects errors for a list.
type N8NErrorFilter struct {
	Kind   string // one kind, or "" for every kind but the editor's test payloads
	Before int64  // the last id of the previous page
	Limit  int
}
