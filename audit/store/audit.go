package store

import (
	"database/sql"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// previousDelivery is what a redelivery is compared with: the workflow of
// the event's first delivery, and the delivery id and time of its last one.
type previousDelivery struct {
	FirstWorkflowID string       `db:"first_workflow_id"`
	LastDeliveryID  string       `db:"last_delivery_id"`
	LastAt          sql.NullTime `db:"last_presented_at"`
	Fingerprint     string       `db:"fingerprint"`
}

// classify says why a new execution of workflowID presented a known key,
// given what the entry says of the deliveries before.
func classify(d audit.Decision, lineage bool, prev previousDelivery, deliveryID, workflowID, fingerprint string, now time.Time) audit.Class {
	switch {
	case lineage:
		return audit.ClassManualRetry
	case d == audit.DecisionReclaimed:
		return audit.ClassAfterFailure
	case prev.FirstWorkflowID != "" && workflowID != "" && workflowID != prev.FirstWorkflowID:
		return audit.ClassParallelWorkflows
	}
	soon := prev.LastAt.Valid && now.Sub(prev.LastAt.Time) <= audit.DoubleStartWindow
	samePrint := fingerprint == "" || prev.Fingerprint == "" || fingerprint == prev.Fingerprint
	switch {
	case deliveryID != "" && deliveryID == prev.LastDeliveryID && soon:
		return audit.ClassDoubleStart
	case deliveryID == "" && prev.LastDeliveryID == "" && samePrint && soon:
		return audit.ClassDoubleStart
	}
	return audit.ClassSenderRetry
}
