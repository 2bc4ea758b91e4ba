package audit

import (
	"time"
)

// The kinds of history line.
const (
	KindClaim       = "claim"
	KindOutcome     = "outcome"
	KindError       = "error"
	KindResolution  = "resolution"
	KindFingerprint = "fingerprint_mismatch"
	KindStale       = "stale"
	// KindRetry is a person's request that n8n retry the entry's failed
	// execution, written before n8n is asked.
	KindRetry = "retry"
	// KindNotHolder is evidence: an execution that does not hold the entry
	// reported an outcome, which moved nothing.
	KindNotHolder = "not_holder"
	// KindContradiction is evidence too: the holder reported an outcome
	// that disagrees with a person's resolution.
	KindContradiction = "contradiction"
	// KindLookup is a person's CRM lookup: its answer (Decision: found,
	// not_found, error), the reference found, who asked and via what
	// (Delivery: page, api, slack). It moves nothing.
	KindLookup = "lookup"
)

// HistoryLine is one thing that happened to an event.
type HistoryLine struct {
	ID           int64     `db:"id" json:"id"`
	Source       string    `db:"source" json:"-"`
	EventID      string    `db:"event_id" json:"-"`
	Item         string    `db:"item" json:"item,omitempty"`
	At           time.Time `db:"at" json:"at"`
	Kind         string    `db:"kind" json:"kind"`
	ExecutionID  string    `db:"execution_id" json:"execution_id,omitempty"`
	RetryOf      string    `db:"retry_of" json:"retry_of,omitempty"`
	WorkflowID   string    `db:"workflow_id" json:"workflow_id,omitempty"`
	WorkflowName string    `db:"workflow_name" json:"workflow_name,omitempty"`
	Node         string    `db:"node" json:"node,omitempty"`
	Decision     string    `db:"decision" json:"decision,omitempty"`
	Delivery     string    `db:"delivery" json:"delivery,omitempty"`
	Class        string    `db:"class" json:"redelivery_class,omitempty"`
	Status       string    `db:"status" json:"status,omitempty"`
	Actor        string    `db:"actor" json:"actor,omitempty"`
	Message      string    `db:"message" json:"message,omitempty"`
	CRMRef       string    `db:"crm_ref" json:"crm_ref,omitempty"`
	ErrorID      *int64    `db:"error_id" json:"error_id,omitempty"`
	// Version is the event's version after the line (0 for lines written
	// before versions were kept).
	Version int64 `db:"version" json:"version,omitempty"`
}
