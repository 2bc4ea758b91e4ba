package store

import (
	"cmp"
	"context"
	"encoding/json"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// alertEvent writes an alert about an event from the history line that
// caused it, in the caller's transaction: the first alert opens the event's
// thread, later ones reply in it and refresh its first message.
func (s *Store) alertEvent(ctx context.Context, tx *sqlx.Tx, kind string, h audit.HistoryLine, now time.Time) error {
	a, err := s.eventAlert(ctx, tx, kind, h, now)
	if err != nil {
		return err
	}
	thread := audit.EventThread(h.Source, h.EventID)
	open, err := s.threadOpen(ctx, tx, thread)
	switch {
	case err != nil:
		return err
	case open:
		return s.reply(ctx, tx, thread, a, now)
	}
	return s.enqueue(ctx, tx, thread, audit.RowAlert, a, now, now)
}

// followUp tells an alerted event's thread what the history line says; an
// event nobody was alerted about gets no message. It reports whether it
// wrote one.
func (s *Store) followUp(ctx context.Context, tx *sqlx.Tx, h audit.HistoryLine, now time.Time) (bool, error) {
	thread := audit.EventThread(h.Source, h.EventID)
	open, err := s.threadOpen(ctx, tx, thread)
	if err != nil || !open {
		return false, err
	}
	a, err := s.eventAlert(ctx, tx, audit.AlertNews, h, now)
	if err != nil {
		return false, err
	}
	return true, s.reply(ctx, tx, thread, a, now)
}

// eventState is what an alert says of its event's entry.
type eventState struct {
	Status     audit.Status `db:"status"`
	UpdatedAt  time.Time    `db:"updated_at"`
	Deliveries int          `db:"deliveries"`
	CRMRef     string       `db:"crm_ref"`
}

// eventAlert builds an alert from a history line and the event's state.
func (s *Store) eventAlert(ctx context.Context, tx *sqlx.Tx, kind string, h audit.HistoryLine, now time.Time) (audit.Alert, error) {
	var ev eventState
	if err := s.get(ctx, tx, &ev, "read event", s.q.EventReadState, h.Source, h.EventID); err != nil {
		return audit.Alert{}, err
	}
	var x audit.Execution
	if h.ExecutionID != "" {
		err := s.get(ctx, tx, &x, "read execution", s.q.ExecutionRead, h.ExecutionID)
		if err != nil && !isNoRows(err) {
			return audit.Alert{}, err
		}
	}
	return eventAlertOf(kind, h, ev, x, now), nil
}

// eventAlertOf is the alert a history line makes, given its entry's state
// and its execution as the service keeps it (the zero Execution when it
// keeps none).
func eventAlertOf(kind string, h audit.HistoryLine, ev eventState, x audit.Execution, now time.Time) audit.Alert {
	a := audit.Alert{
		Kind: kind, Source: h.Source, EventID: h.EventID, Item: h.Item, Status: ev.Status, Since: ev.UpdatedAt,
		Deliveries: ev.Deliveries, CRMRef: ev.CRMRef, WorkflowID: h.WorkflowID, WorkflowName: h.WorkflowName,
		Node: h.Node, ExecutionID: h.ExecutionID, RetryOf: h.RetryOf, Message: h.Message,
		News: h.Kind, Decision: h.Decision, Delivery: h.Delivery, Actor: h.Actor, At: now,
	}
	if h.ErrorID != nil {
		a.ErrorID = *h.ErrorID
	}
	// An outcome report or the stale detector says less about the execution
	// than its claim did, and no history line keeps the URL n8n put in an
	// error payload: fill in what the service knows of it.
	if a.ExecutionID != "" {
		a.WorkflowID, a.WorkflowName = cmp.Or(a.WorkflowID, x.WorkflowID), cmp.Or(a.WorkflowName, x.WorkflowName)
		a.N8NURL, a.RetryOf = x.URL, cmp.Or(a.RetryOf, x.RetryOf)
	}
	return a
}

func (s *Store) reply(ctx context.Context, tx *sqlx.Tx, thread string, a audit.Alert, now time.Time) error {
	if err := s.enqueue(ctx, tx, thread, audit.RowFollowup, a, now, now); err != nil {
		return err
	}
	return s.enqueue(ctx, tx, thread, audit.RowRefresh, refreshOf(a, now), now, now)
}

// refreshOf is the row that, after a reply, brings a thread's first
// message up to date.
func refreshOf(a audit.Alert, now time.Time) audit.Alert {
	return audit.Alert{Kind: a.Kind, Source: a.Source, EventID: a.EventID, ErrorID: a.ErrorID, At: now}
}

func (s *Store) threadOpen(ctx context.Context, tx *sqlx.Tx, thread string) (bool, error) {
	var open bool
	err := s.get(ctx, tx, &open, "read thread",
		s.q.OutboxThreadOpen, thread)
	return open, err
}

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

// outboxRow is an outbox row as written, but for its times.
type outboxRow struct {
	ThreadKey string `json:"thread_key"`
	Kind      string `json:"kind"`
	Source    string `json:"source"`
	EventID   string `json:"event_id"`
	ErrorID   *int64 `json:"error_id"`
	Payload   string `json:"payload"`
	State     string `json:"state"`
	LastError string `json:"last_error"`
	AlertKind string `json:"alert_kind"`
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
	var ev struct {
		Status     audit.Status `db:"status"`
		UpdatedAt  time.Time    `db:"updated_at"`
		Deliveries int          `db:"deliveries"`
		CRMRef     string       `db:"crm_ref"`
	}
	err := s.get(ctx, s.db, &ev, "read event", s.q.EventReadState, root.Source, root.EventID)
	if isNoRows(err) {
		a.Resolution = "the event is no longer in the ledger"
		return a, nil
	}
	if err != nil {
		return a, err
	}
	a.Status, a.Since, a.Deliveries, a.CRMRef = ev.Status, ev.UpdatedAt, ev.Deliveries, ev.CRMRef
	var last audit.HistoryLine
	err = s.get(ctx, s.db, &last, "read history", s.q.HistoryReadLastSettlement, root.Source, root.EventID)
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
