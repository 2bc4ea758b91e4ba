package audit

import (
	"strconv"
	"time"
)

// The kinds of alert.
const (
	AlertExecutionError = "execution_error"      // a linked error: the outcome is unknown
	AlertUnlinkedError  = "unlinked_error"       // an error that links to no event
	AlertUnknown        = "unknown_outcome"      // a workflow reported it cannot tell
	AlertStale          = "stale"                // processing too long without an outcome
	AlertFingerprint    = "fingerprint_mismatch" // one key, two different payloads
	AlertNotHolder      = "not_holder"           // done or unknown reported by an execution that does not hold it
	AlertNews           = "news"                 // later news in an alerted event's thread
	AlertIDReset        = "n8n_ids_restarted"    // n8n handed out an execution id again (a restore?)
	AlertContradiction  = "contradiction"        // the holder's report disagrees with a person's resolution
)

// Alert is what an outbox row asks to tell people. notify renders it when
// it sends, so links follow the configuration of the sending instance.
type Alert struct {
	Kind         string    `json:"kind"`
	Source       string    `json:"source,omitempty"`
	EventID      string    `json:"event_id,omitempty"`
	Item         string    `json:"item,omitempty"`
	Status       Status    `json:"status,omitempty"`
	Since        time.Time `json:"since,omitzero"` // when the entry entered its status
	Deliveries   int       `json:"deliveries,omitempty"`
	CRMRef       string    `json:"crm_ref,omitempty"`
	WorkflowID   string    `json:"workflow_id,omitempty"`
	WorkflowName string    `json:"workflow_name,omitempty"`
	Node         string    `json:"node,omitempty"`
	ExecutionID  string    `json:"execution_id,omitempty"`
	RetryOf      string    `json:"retry_of,omitempty"`
	N8NURL       string    `json:"n8n_url,omitempty"` // the payload's execution.url, a fallback link
	ErrorID      int64     `json:"error_id,omitempty"`
	ErrorKind    string    `json:"error_kind,omitempty"`
	Message      string    `json:"message,omitempty"`
	// What a follow-up reports: the history line's kind, decision,
	// delivery and who acted.
	News     string `json:"news,omitempty"`
	Decision string `json:"decision,omitempty"`
	Delivery string `json:"delivery,omitempty"`
	Actor    string `json:"actor,omitempty"`
	// Resolution says what settled the event, when a thread's first
	// message is brought up to date.
	Resolution string    `json:"resolution,omitempty"`
	At         time.Time `json:"at"`
	// Group names the group of an error linked to no event, and its repeat
	// interval; Count, FirstAt and LastAt say how many of its errors are
	// linked to no event, when they were first and last seen.
	Group      string    `json:"group,omitempty"`
	GroupFrom  time.Time `json:"group_from,omitzero"`
	GroupUntil time.Time `json:"group_until,omitzero"`
	Count      int       `json:"count,omitempty"`
	FirstAt    time.Time `json:"first_at,omitzero"`
	LastAt     time.Time `json:"last_at,omitzero"`
}

// HasEvent reports whether the alert is about an event (not an unlinked
// error).
func (a Alert) HasEvent() bool { return a.Source != "" }

// The roles of an outbox row in its thread. A thread is the outbox's own
// notion: the rows that share a thread key go out one at a time and in
// order, and the transaction that writes an audit entry decides each row's
// role. How a notifier shows a thread (a Slack thread, or separate
// messages) is notify's business.
const (
	RowAlert    = "alert"    // the first message of a thread
	RowFollowup = "followup" // a reply in the thread
	RowRefresh  = "refresh"  // update the first message to the current state
)

// EventThread names the thread of an event's messages.
func EventThread(source, eventID string) string { return "event:" + source + "/" + eventID }

// ErrorThread names the thread of an error that links to no event.
func ErrorThread(id int64) string { return "error:" + strconv.FormatInt(id, 10) }
