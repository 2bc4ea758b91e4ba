package audit

import (
	"context"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
)

// The kinds of history line.
const (
	KindClaim       = "claim"
	KindOutcome     = "outcome"
	KindError       = "error"
	KindResolution  = "resolution"
	KindFingerprint = "fingerprint_mismatch"
	KindStale       = "stale"
	// KindNotHolder is evidence: an execution that does not hold the entry
	// reported an outcome, which moved nothing.
	KindNotHolder = "not_holder"
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
}

const insertHistory = `INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of,
	workflow_id, workflow_name, node, decision, delivery, class, status, actor, message, crm_ref, error_id)
	VALUES (:source, :event_id, :item, :at, :kind, :execution_id, :retry_of,
	:workflow_id, :workflow_name, :node, :decision, :delivery, :class, :status, :actor, :message, :crm_ref, :error_id)
	RETURNING id`

// addHistory writes one history line and returns its id.
func (s *Store) addHistory(ctx context.Context, tx *sqlx.Tx, h HistoryLine, now time.Time) (int64, error) {
	arg := map[string]any{
		"source": h.Source, "event_id": h.EventID, "item": h.Item, "at": s.d.t(now), "kind": h.Kind,
		"execution_id": h.ExecutionID, "retry_of": h.RetryOf, "workflow_id": h.WorkflowID,
		"workflow_name": h.WorkflowName, "node": h.Node, "decision": h.Decision, "delivery": h.Delivery, "class": h.Class,
		"status": h.Status, "actor": h.Actor, "message": h.Message, "crm_ref": h.CRMRef, "error_id": h.ErrorID,
	}
	var id int64
	_, err := s.namedGet(ctx, tx, &id, "write history", insertHistory, arg)
	return id, err
}

const selectHistory = `SELECT id, source, event_id, item, at, kind, execution_id, retry_of, workflow_id,
	workflow_name, node, decision, delivery, class, status, actor, message, crm_ref, error_id FROM event_history`

// historyPage reads one page of an event's lines (newest first from the
// index, returned oldest first), the counts by kind and the refused
// reports.
func (s *Store) historyPage(ctx context.Context, q any, d *EventDetail, p HistoryPage) error {
	var lines []HistoryLine
	if err := s.selectAll(ctx, q, &lines, "read history", selectHistory+
		` WHERE source = ? AND event_id = ? AND id < ? ORDER BY id DESC LIMIT ?`,
		d.Source, d.EventID, p.Before, p.Limit+1); err != nil {
		return err
	}
	if len(lines) > p.Limit {
		lines = lines[:p.Limit]
		d.HistoryNext = lines[p.Limit-1].ID
	}
	slices.Reverse(lines)
	d.History = lines
	var counts []struct {
		Kind string `db:"kind"`
		N    int    `db:"n"`
	}
	if err := s.selectAll(ctx, q, &counts, "count history", `SELECT kind, count(*) AS n FROM event_history
		WHERE source = ? AND event_id = ? GROUP BY kind`, d.Source, d.EventID); err != nil {
		return err
	}
	d.HistoryCounts = map[string]int{}
	for _, c := range counts {
		d.HistoryCounts[c.Kind] = c.N
		d.HistoryTotal += c.N
	}
	if d.HistoryCounts[KindNotHolder] == 0 {
		return nil
	}
	if err := s.selectAll(ctx, q, &d.Refused, "read refused reports", selectHistory+
		` WHERE source = ? AND event_id = ? AND kind = ? ORDER BY id DESC LIMIT 20`,
		d.Source, d.EventID, KindNotHolder); err != nil {
		return err
	}
	slices.Reverse(d.Refused)
	return nil
}
