// Package audit is the domain of retryaudit: the ledger of webhook events,
// the executions that touch them, their lineage, the errors n8n reports and
// the alerts about them. It holds no SQL: the store that keeps all of it in
// PostgreSQL or SQLite is the package audit/store.
//
// An event happens once; executions of a workflow can be many. The ledger
// holds one entry per event key (source, event id and, for multi-item events,
// item) and moves it between three states with conditional updates only:
//
//	processing  claimed; the action is running or its outcome is unknown
//	done        the external system confirmed it
//	failed      it certainly did not happen; a retry may capture the entry
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Status is the state of a ledger entry.
type Status string

// The states of a ledger entry.
const (
	StatusProcessing Status = "processing"
	StatusDone       Status = "done"
	StatusFailed     Status = "failed"
	// StatusCancelled: a person said never to act on it (a test event, a
	// fraudulent order, one handled by hand). Every later claim is told
	// so; a holder's later done is kept as a contradiction.
	StatusCancelled Status = "cancelled"
)

// Statuses are the states of an entry, in the order pages list them.
var Statuses = []Status{StatusProcessing, StatusDone, StatusFailed, StatusCancelled}

// Decision is the claim's answer for one entry.
type Decision string

// The decisions of a claim. Process is true exactly for claimed, held and
// reclaimed.
const (
	DecisionClaimed    Decision = "claimed"     // a new key: the caller is first
	DecisionHeld       Decision = "held"        // the caller (or what it retries) already holds it
	DecisionReclaimed  Decision = "reclaimed"   // it was failed: the caller captured it
	DecisionDuplicate  Decision = "duplicate"   // it is done: do nothing
	DecisionInProgress Decision = "in_progress" // another execution holds it: do nothing
	DecisionCancelled  Decision = "cancelled"   // a person said never to act on it: do nothing
)

// Process reports whether the caller should perform the external action.
func (d Decision) Process() bool {
	return d == DecisionClaimed || d == DecisionHeld || d == DecisionReclaimed
}

// rank orders decisions for the top level of a multi-item claim: the most
// actionable one wins.
func (d Decision) Rank() int {
	switch d {
	case DecisionClaimed:
		return 5
	case DecisionReclaimed:
		return 4
	case DecisionHeld:
		return 3
	case DecisionInProgress:
		return 2
	}
	return 1
}

// Delivery says how an execution came to present a key.
type Delivery string

// The kinds of delivery.
const (
	DeliveryFirst         Delivery = "first_delivery"
	DeliveryRedelivery    Delivery = "redelivery"     // a known key, a new execution, no retry_of
	DeliveryManualRetry   Delivery = "manual_retry"   // an n8n Retry of an execution that presented it
	DeliverySameExecution Delivery = "same_execution" // the execution presented it before
)

// Outcome is what a workflow reports after its external action.
type Outcome string

// The outcomes a workflow can report.
const (
	OutcomeDone    Outcome = "done"
	OutcomeFailed  Outcome = "failed"
	OutcomeUnknown Outcome = "unknown"
)

// Review reasons: why an entry waits for a person.
const (
	ReviewError         = "error"
	ReviewUnknown       = "unknown"
	ReviewStale         = "stale"
	ReviewNotHolder     = "not_holder"    // done or unknown from an execution that does not hold it
	ReviewContradiction = "contradiction" // the holder contradicted a person's resolution
)

// IdempotencyKey returns the key to pass to the external system for one
// entry. It depends only on the entry's identity, so every attempt of every
// execution sends the same one.
func IdempotencyKey(source, eventID, item string) string {
	h := sha256.New()
	for _, part := range []string{source, eventID, item} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return "ra_" + hex.EncodeToString(h.Sum(nil))[:40]
}

// Class says why a known key was presented again: what to do about a
// redelivery depends on who sent it twice.
type Class string

// The classes of a redelivery. A first delivery and a resend within one
// execution have none.
const (
	// ClassDoubleStart: the same delivery id (or, without ids, the same
	// fingerprint) again within DoubleStartWindow from the same workflow:
	// n8n started two executions for one call.
	ClassDoubleStart Class = "n8n_double_start"
	// ClassSenderRetry: the sender delivered the event again (a new
	// delivery id, or the same one later): it retried, or someone resent.
	ClassSenderRetry Class = "sender_retry"
	// ClassParallelWorkflows: another workflow presented the key: two
	// subscriptions, or an old version still active.
	ClassParallelWorkflows Class = "parallel_workflows"
	// ClassManualRetry: an n8n Retry of an execution that presented it.
	ClassManualRetry Class = "manual_retry"
	// ClassAfterFailure: it captured an entry left failed.
	ClassAfterFailure Class = "after_failure"
)

// DoubleStartWindow is how close two deliveries of one call must be to be
// taken for n8n starting twice (seen 20–155 ms apart).
const DoubleStartWindow = 2 * time.Second
