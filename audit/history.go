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
	ID           int64     `json:"id"`
	Source       string    `json:"-"`
	EventID      string    `json:"-"`
	Item         string    `json:"item,omitempty"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	ExecutionID  string    `json:"execution_id,omitempty"`
	RetryOf      string    `json:"retry_of,omitempty"`
	WorkflowID   string    `json:"workflow_id,omitempty"`
	WorkflowName string    `json:"workflow_name,omitempty"`
	Node         string    `json:"node,omitempty"`
	Decision     string    `json:"decision,omitempty"`
	Delivery     string    `json:"delivery,omitempty"`
	Class        string    `json:"redelivery_class,omitempty"`
	Status       string    `json:"status,omitempty"`
	Actor        string    `json:"actor,omitempty"`
	Message      string    `json:"message,omitempty"`
	CRMRef       string    `json:"crm_ref,omitempty"`
	ErrorID      *int64    `json:"error_id,omitempty"`
	// Version is the event's version after the line (0 for lines written
	// before versions were kept).
	Version int64 `json:"version,omitempty"`
}
