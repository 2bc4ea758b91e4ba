package audit

import (
	"fmt"
	"time"
)

// The phases of an execution that n8n's execution hooks report.
const (
	PhaseStart = "start"
	PhaseEnd   = "end"
)

// MaxHookReports caps the reports of one hook call: the hooks file sends
// what queued up while the service was away in calls of at most this many.
const MaxHookReports = 100

// N8NHookReport is what n8n's execution hooks (n8n/retryaudit-hooks.js,
// loaded by n8n through EXTERNAL_HOOK_FILES) say about one execution's start
// or end, from inside n8n's own process: n8n's word, not a workflow's. Ids
// are qualified with the instance the hook token names.
type N8NHookReport struct {
	Phase        string
	ExecutionID  string
	WorkflowID   string
	WorkflowName string
	Mode         string
	// RetryOf is the execution this one retries, where n8n's hook had it.
	RetryOf   string
	StartedAt time.Time
	StoppedAt time.Time // end only
	// Status is n8n's status at the end: success, error, crashed,
	// canceled or waiting (a Wait node: it ends again later).
	Status   string
	LastNode string
	// The error n8n recorded for a failed execution (end only).
	ErrorMessage string
	ErrorNode    string
	HTTPCode     string
}

// The statuses n8n ends an execution with.
var hookStatuses = map[string]bool{"success": true, "error": true, "crashed": true, "canceled": true, "waiting": true}

// Finished reports whether the report is of an execution that will not run
// again under its id (a waiting one resumes under the same id).
func (r N8NHookReport) Finished() bool { return r.Phase == PhaseEnd && r.Status != "waiting" }

// Failed reports an end that n8n's error workflow would be told about: an
// error, a crash or a person stopping it, in any mode but a person's own
// run in the editor (n8n tells the error workflow nothing of those).
func (r N8NHookReport) Failed() bool {
	return r.Phase == PhaseEnd && r.Mode != "manual" &&
		(r.Status == "error" || r.Status == "crashed" || r.Status == "canceled")
}

// Validate checks one report; prefix names it in a call ("reports[3].").
func (r N8NHookReport) Validate(f FieldErrors, prefix string) {
	switch r.Phase {
	case PhaseStart, PhaseEnd:
	case "":
		f.Add(prefix+"phase", "required")
	default:
		f.Add(prefix+"phase", `must be "start" or "end"`)
	}
	f.id(prefix+"execution_id", r.ExecutionID, true)
	f.id(prefix+"workflow_id", r.WorkflowID, true)
	f.text(prefix+"workflow_name", r.WorkflowName, false, MaxNameLen)
	f.text(prefix+"mode", r.Mode, true, 40)
	f.id(prefix+"retry_of", r.RetryOf, false)
	if r.RetryOf != "" && r.RetryOf == r.ExecutionID {
		f.Add(prefix+"retry_of", "must name another execution than execution_id")
	}
	if r.StartedAt.IsZero() {
		f.Add(prefix+"started_at", "required (RFC 3339)")
	}
	if r.Phase == PhaseEnd {
		if !hookStatuses[r.Status] {
			f.Add(prefix+"status", "must be one of success, error, crashed, canceled, waiting")
		}
		if r.StoppedAt.IsZero() {
			f.Add(prefix+"stopped_at", "required at the end (RFC 3339)")
		} else if r.StoppedAt.Before(r.StartedAt) {
			f.Add(prefix+"stopped_at", "must not be before started_at")
		}
	}
	f.text(prefix+"last_node", r.LastNode, false, MaxNameLen)
	f.note(prefix+"error.message", r.ErrorMessage, false, MaxMessageLen)
	f.text(prefix+"error.node", r.ErrorNode, false, MaxNameLen)
	f.text(prefix+"error.http_code", r.HTTPCode, false, 20)
}

// ValidateHookReports checks a hook call's reports and names every bad
// field by its place.
func ValidateHookReports(reports []N8NHookReport) error {
	f := FieldErrors{}
	switch {
	case len(reports) == 0:
		f.Add("reports", "required: at least one report")
	case len(reports) > MaxHookReports:
		f.Add("reports", fmt.Sprintf("must hold at most %d reports", MaxHookReports))
	}
	for i, r := range reports {
		r.Validate(f, fmt.Sprintf("reports[%d].", i))
	}
	return f.Err()
}

// N8NHookResult is the answer to one hook report.
type N8NHookResult struct {
	ExecutionID string
	// NewExecution says that the id named an execution the service knew
	// and this report is of another one: n8n's ids started again.
	NewExecution bool
	// Duplicate: the same report was recorded before (the hooks file
	// sends again what it could not confirm).
	Duplicate bool
	// ErrorID is the error recorded for a failed execution, 0 for none.
	ErrorID  int64
	ErrorKey string // the error's dedupe key, for the store
	Linked   *EventKey
	Note     string
}

// Stored returns the report as the store keeps it: every text valid UTF-8
// without NUL, names and the error message redacted.
func (r N8NHookReport) Stored(red Redactor) N8NHookReport {
	for _, f := range []*string{&r.WorkflowName, &r.LastNode, &r.ErrorMessage, &r.ErrorNode, &r.HTTPCode} {
		*f, _ = CleanText(*f)
	}
	r.WorkflowName = Truncate(red.RedactText(r.WorkflowName), MaxNameLen)
	r.LastNode = Truncate(red.RedactText(r.LastNode), MaxNameLen)
	r.ErrorNode = Truncate(red.RedactText(r.ErrorNode), MaxNameLen)
	r.ErrorMessage = Truncate(red.RedactText(r.ErrorMessage), MaxMessageLen)
	return r
}
