package store

import (
	"context"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// addHistory writes one history line and returns its id.
func (s *Store) addHistory(ctx context.Context, tx *sqlx.Tx, h audit.HistoryLine, now time.Time) (int64, error) {
	arg := map[string]any{
		"source": h.Source, "event_id": h.EventID, "item": h.Item, "at": s.t(now), "kind": h.Kind,
		"execution_id": h.ExecutionID, "retry_of": h.RetryOf, "workflow_id": h.WorkflowID,
		"workflow_name": h.WorkflowName, "node": h.Node, "decision": h.Decision, "delivery": h.Delivery, "class": h.Class,
		"status": h.Status, "actor": h.Actor, "message": h.Message, "crm_ref": h.CRMRef, "error_id": h.ErrorID,
	}
	var id int64
	_, err := s.namedGet(ctx, tx, &id, "write history", s.q.HistoryAdd, arg)
	return id, err
}

// historyPage reads one page of an event's lines (newest first from the
// index, returned oldest first), the counts by kind and the refused
// reports.
func (s *Store) historyPage(ctx context.Context, q any, d *audit.EventDetail, p audit.HistoryPage) error {
	var lines []audit.HistoryLine
	if err := s.selectAll(ctx, q, &lines, "read history", s.q.HistoryReadPage,
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
	if err := s.selectAll(ctx, q, &counts, "count history", s.q.HistoryCount, d.Source, d.EventID); err != nil {
		return err
	}
	d.HistoryCounts = map[string]int{}
	for _, c := range counts {
		d.HistoryCounts[c.Kind] = c.N
		d.HistoryTotal += c.N
	}
	if d.HistoryCounts[audit.KindNotHolder] == 0 {
		return nil
	}
	if err := s.selectAll(ctx, q, &d.Refused, "read refused reports", s.q.HistoryReadRefusedReports,
		d.Source, d.EventID, audit.KindNotHolder); err != nil {
		return err
	}
	slices.Reverse(d.Refused)
	return nil
}
