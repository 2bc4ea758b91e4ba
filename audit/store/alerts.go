package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// enqueue writes one outbox row in the caller's transaction; it is sent at
// due or later.
func (s *Store) enqueue(ctx context.Context, tx *sqlx.Tx, thread, kind string, a audit.Alert, now, due time.Time) error {
	row, err := outboxRowOf(thread, kind, a)
	if err != nil {
		return err
	}
	if kind == audit.RowAlert {
		if err := s.count(ctx, tx, now, a.Source, a.WorkflowID, audit.MetricAlert+a.Kind); err != nil {
			return err
		}
	}
	_, err = s.namedExec(ctx, tx, "write outbox", s.q.OutboxWrite, map[string]any{
		"now": s.t(now), "due": s.t(due), "thread_key": row.ThreadKey, "kind": row.Kind, "source": row.Source,
		"event_id": row.EventID, "error_id": row.ErrorID, "payload": row.Payload, "state": row.State,
		"last_error": row.LastError, "alert_kind": row.AlertKind,
	})
	return err
}

// outboxRowOf is the outbox row of an alert: a drill's is skipped, not sent.
func outboxRowOf(thread, kind string, a audit.Alert) (outboxRow, error) {
	payload, err := json.Marshal(a)
	if err != nil {
		return outboxRow{}, &audit.Error{Code: audit.CodeInternal, Message: "encode alert", Err: err}
	}
	var errorID *int64
	if a.ErrorID != 0 {
		errorID = &a.ErrorID
	}
	state, why := audit.OutboxPending, ""
	if scratch(a.Source) {
		state, why = audit.OutboxSkipped, "a drill of retryaudit check: not sent"
	}
	return outboxRow{ThreadKey: thread, Kind: kind, Source: a.Source, EventID: a.EventID, ErrorID: errorID,
		Payload: string(payload), State: state, LastError: why, AlertKind: a.Kind}, nil
}

// CurrentAlert returns a thread's first alert brought up to date: the
// event's status now, and the outcome or resolution that settled it; for a
// group of errors linked to no event, how many there are now.
func (s *Store) CurrentAlert(ctx context.Context, root audit.Alert) (audit.Alert, error) {
	if root.Group != "" {
		return s.groupAlert(ctx, root)
	}
	if !root.HasEvent() {
		return root, nil
	}
	a := root
	var ev eventRead
	key := audit.EventKey{Source: root.Source, EventID: root.EventID}
	err := s.one(ctx, s.db, &ev, "read event", s.q.EventRead, eventArgs{Source: key.Source, EventID: key.EventID,
		Cutoff: s.t(s.reviewCutoff())})
	if isNoRows(err) {
		a.Resolution = "the event is no longer in the ledger"
		return a, nil
	}
	if err != nil {
		return a, err
	}
	a.Status, a.Since, a.Deliveries, a.CRMRef = audit.Status(ev.Status), ev.UpdatedAt.Time, ev.Deliveries, ev.CRMRef
	var last historyRow
	err = s.one(ctx, s.db, &last, "read history", s.q.HistoryReadLastSettlement, key)
	switch {
	case isNoRows(err):
		return a, nil
	case err != nil:
		return a, err
	case last.Kind == audit.KindResolution:
		a.Resolution = "Resolved " + last.Decision + " by " + last.Actor + ": " + last.Message
	default:
		a.Resolution = "Reported " + last.Message
	}
	return a, nil
}
