package audit

import (
	"fmt"
	"slices"
)

// ClaimRequest is what a workflow presents before its external action.
type ClaimRequest struct {
	Source       string
	EventID      string
	ExecutionID  string
	WorkflowID   string
	WorkflowName string
	Node         string
	RetryOf      string
	Items        []string
	Fingerprint  string
	// DeliveryID is the sender's id of this delivery (a request or
	// delivery id header), when it sends one.
	DeliveryID string
	// RunStamp is what only the execution's own run data holds (see
	// StampMaker); Mode, the execution's mode as the workflow sees it.
	RunStamp string
	Mode     string
}

// Validate checks every field and names each bad one.
func (r ClaimRequest) Validate() error {
	f := FieldErrors{}
	f.source("source", r.Source)
	f.text("event_id", r.EventID, true, MaxEventIDLen)
	f.id("execution_id", r.ExecutionID, true)
	f.id("workflow_id", r.WorkflowID, false)
	f.text("workflow_name", r.WorkflowName, false, MaxNameLen)
	f.text("node", r.Node, false, MaxNameLen)
	f.id("retry_of", r.RetryOf, false)
	if r.RetryOf != "" && r.RetryOf == r.ExecutionID {
		f.Add("retry_of", "must name another execution than execution_id")
	}
	f.text("fingerprint", r.Fingerprint, false, MaxNameLen)
	f.text("delivery_id", r.DeliveryID, false, MaxItemLen)
	f.stamp("run_stamp", r.RunStamp)
	f.text("mode", r.Mode, false, 40)
	if len(r.Items) > MaxItems {
		f.Add("items", fmt.Sprintf("must hold at most %d items", MaxItems))
	}
	for i, item := range r.Items {
		f.text(fmt.Sprintf("items[%d]", i), item, true, MaxItemLen)
	}
	return f.Err()
}

// stored returns a valid request as the store keeps it: its items unique
// and sorted, the workflow's and the node's names redacted (people name
// them freely, and n8n sends them as they are: a name can hold a
// credential) and kept within MaxNameLen.
func (r ClaimRequest) Stored(red Redactor) ClaimRequest {
	r.Items = uniqueSorted(r.Items)
	r.WorkflowName = Truncate(red.RedactText(r.WorkflowName), MaxNameLen)
	r.Node = Truncate(red.RedactText(r.Node), MaxNameLen)
	return r
}

// ClaimResult is the answer to a claim. For a multi-item claim, Decision is
// the most actionable of the items' decisions and Process is true if any
// item's is.
type ClaimResult struct {
	Process             bool
	Decision            Decision
	Status              Status
	Delivery            Delivery
	Class               Class // why a known key was presented again
	Deliveries          int
	HolderExecutionID   string
	IdempotencyKey      string
	FingerprintMismatch bool
	Items               []ItemClaim
	// LineageNote says how the service learned (or failed to learn) that
	// the execution is a retry, when it asked n8n.
	LineageNote string
}

// ItemClaim is the answer for one item of a multi-item claim.
type ItemClaim struct {
	Item              string
	Process           bool
	Decision          Decision
	Status            Status
	HolderExecutionID string
	IdempotencyKey    string
}

func uniqueSorted(items []string) []string {
	if len(items) == 0 {
		return nil
	}
	out := slices.Clone(items)
	slices.Sort(out) // one lock order for every claim: no deadlocks between them
	return slices.Compact(out)
}
