package audit

// OutcomeRequest is what a workflow reports after its external action.
type OutcomeRequest struct {
	Source      string
	EventID     string
	Item        string
	Outcome     Outcome
	ExecutionID string
	WorkflowID  string
	Reason      string
	CRMRef      string
	RunStamp    string // as the claim's (ClaimRequest.RunStamp)
	Mode        string
}

// Validate checks every field and names each bad one.
func (r OutcomeRequest) Validate() error {
	f := FieldErrors{}
	f.source("source", r.Source)
	f.text("event_id", r.EventID, true, MaxEventIDLen)
	f.text("item", r.Item, false, MaxItemLen)
	switch r.Outcome {
	case OutcomeDone, OutcomeFailed, OutcomeUnknown:
	case "":
		f.Add("outcome", "required: done, failed or unknown")
	default:
		f.Add("outcome", "must be done, failed or unknown")
	}
	// Only the holder may move an entry: a report must say who it is.
	f.id("execution_id", r.ExecutionID, true)
	f.id("workflow_id", r.WorkflowID, false)
	f.note("reason", r.Reason, false, MaxTextLen)
	f.text("crm_ref", r.CRMRef, false, MaxNameLen)
	f.stamp("run_stamp", r.RunStamp)
	f.text("mode", r.Mode, false, 40)
	return f.Err()
}

// OutcomeResult is the answer to an outcome report.
type OutcomeResult struct {
	Changed     bool
	Status      Status
	NeedsReview bool
	Message     string // how the report relates to the holder, as the history says
}
