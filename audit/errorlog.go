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

// N8NErrorRecord is an error the service received (or found), as stored.
type N8NErrorRecord struct {
	ID               int64          `db:"id"`
	DedupeKey        string         `db:"dedupe_key"`
	ReceivedAt       time.Time      `db:"received_at"`
	Kind             string         `db:"kind"`
	ExecutionID      string         `db:"execution_id"`
	RetryOf          string         `db:"retry_of"`
	Root             string         `db:"root_execution_id"`
	WorkflowID       string         `db:"workflow_id"`
	WorkflowName     string         `db:"workflow_name"`
	Mode             string         `db:"mode"`
	Node             string         `db:"node"`
	Message          string         `db:"message"`
	HTTPCode         string         `db:"http_code"`
	URL              string         `db:"n8n_url"`
	Payload          string         `db:"payload"`
	PayloadTruncated bool           `db:"payload_truncated"`
	PayloadDropped   bool           `db:"payload_dropped"`
	Note             string         `db:"intake_note"`
	LinkedSource     sql.NullString `db:"source"`
	LinkedEventID    sql.NullString `db:"event_id"`
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
