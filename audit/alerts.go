package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
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

// alertEvent writes an alert about an event from the history line that
// caused it, in the caller's transaction: the first alert opens the event's
// thread, later ones reply in it and refresh its first message.
func (s *Store) alertEvent(ctx context.Context, tx *sqlx.Tx, kind string, h HistoryLine, now time.Time) error {
	a, err := s.eventAlert(ctx, tx, kind, h, now)
	if err != nil {
		return err
	}
	thread := EventThread(h.Source, h.EventID)
	open, err := s.threadOpen(ctx, tx, thread)
	switch {
	case err != nil:
		return err
	case open:
		return s.reply(ctx, tx, thread, a, now)
	}
	return s.enqueue(ctx, tx, thread, RowAlert, a, now, now)
}

// followUp tells an alerted event's thread what the history line says; an
// event nobody was alerted about gets no message. It reports whether it
// wrote one.
func (s *Store) followUp(ctx context.Context, tx *sqlx.Tx, h HistoryLine, now time.Time) (bool, error) {
	thread := EventThread(h.Source, h.EventID)
	open, err := s.threadOpen(ctx, tx, thread)
	if err != nil || !open {
		return false, err
	}
	a, err := s.eventAlert(ctx, tx, AlertNews, h, now)
	if err != nil {
		return false, err
	}
	return true, s.reply(ctx, tx, thread, a, now)
}

// eventAlert builds an alert from a history line and the event's state.
func (s *Store) eventAlert(ctx context.Context, tx *sqlx.Tx, kind string, h HistoryLine, now time.Time) (Alert, error) {
	var ev struct {
		Status     Status    `db:"status"`
		UpdatedAt  time.Time `db:"updated_at"`
		Deliveries int       `db:"deliveries"`
		CRMRef     string    `db:"crm_ref"`
	}
	if err := s.get(ctx, tx, &ev, "read event", `SELECT status, updated_at, deliveries, crm_ref
		FROM webhook_events WHERE source = ? AND event_id = ?`, h.Source, h.EventID); err != nil {
		return Alert{}, err
	}
	a := Alert{
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
		var x Execution
		err := s.get(ctx, tx, &x, "read execution", selectExecution+` WHERE execution_id = ?`, a.ExecutionID)
		if err != nil && !isNoRows(err) {
			return Alert{}, err
		}
		a.WorkflowID, a.WorkflowName = cmp.Or(a.WorkflowID, x.WorkflowID), cmp.Or(a.WorkflowName, x.WorkflowName)
		a.N8NURL, a.RetryOf = x.URL, cmp.Or(a.RetryOf, x.RetryOf)
	}
	return a, nil
}

func (s *Store) reply(ctx context.Context, tx *sqlx.Tx, thread string, a Alert, now time.Time) error {
	if err := s.enqueue(ctx, tx, thread, RowFollowup, a, now, now); err != nil {
		return err
	}
	return s.enqueue(ctx, tx, thread, RowRefresh, Alert{Kind: a.Kind, Source: a.Source, EventID: a.EventID,
		ErrorID: a.ErrorID, At: now}, now, now)
}

func (s *Store) threadOpen(ctx context.Context, tx *sqlx.Tx, thread string) (bool, error) {
	var open bool
	err := s.get(ctx, tx, &open, "read thread",
		`SELECT EXISTS (SELECT 1 FROM outbox WHERE thread_key = ? AND kind = 'alert')`, thread)
	return open, err
}

const insertOutbox = `INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
	last_error, alert_kind)
	VALUES (:now, :due, :thread_key, :kind, :source, :event_id, :error_id, :payload, :state, :last_error, :alert_kind)`

// enqueue writes one outbox row in the caller's transaction; it is sent at
// due or later.
func (s *Store) enqueue(ctx context.Context, tx *sqlx.Tx, thread, kind string, a Alert, now, due time.Time) error {
	payload, err := json.Marshal(a)
	if err != nil {
		return &Error{Code: CodeInternal, Message: "encode alert", Err: err}
	}
	var errorID *int64
	if a.ErrorID != 0 {
		errorID = &a.ErrorID
	}
	state, why := OutboxPending, ""
	if scratch(a.Source) {
		state, why = OutboxSkipped, "a drill of retryaudit check: not sent"
	}
	if kind == RowAlert {
		if err := s.count(ctx, tx, now, a.Source, a.WorkflowID, MetricAlert+a.Kind); err != nil {
			return err
		}
	}
	_, err = s.namedExec(ctx, tx, "write outbox", insertOutbox, map[string]any{
		"now": s.d.t(now), "due": s.d.t(due), "thread_key": thread, "kind": kind, "source": a.Source,
		"event_id": a.EventID, "error_id": errorID, "payload": string(payload), "state": state, "last_error": why,
		"alert_kind": a.Kind,
	})
	return err
}

// CurrentAlert returns a thread's first alert brought up to date: the
// event's status now, and the outcome or resolution that settled it; for a
// group of errors linked to no event, how many there are now.
func (s *Store) CurrentAlert(ctx context.Context, root Alert) (Alert, error) {
	if root.Group != "" {
		return s.groupAlert(ctx, root)
	}
	if !root.HasEvent() {
		return root, nil
	}
	a := root
	var ev struct {
		Status     Status    `db:"status"`
		UpdatedAt  time.Time `db:"updated_at"`
		Deliveries int       `db:"deliveries"`
		CRMRef     string    `db:"crm_ref"`
	}
	err := s.get(ctx, s.db, &ev, "read event", `SELECT status, updated_at, deliveries, crm_ref
		FROM webhook_events WHERE source = ? AND event_id = ?`, root.Source, root.EventID)
	if isNoRows(err) {
		a.Resolution = "the event is no longer in the ledger"
		return a, nil
	}
	if err != nil {
		return a, err
	}
	a.Status, a.Since, a.Deliveries, a.CRMRef = ev.Status, ev.UpdatedAt, ev.Deliveries, ev.CRMRef
	var last HistoryLine
	err = s.get(ctx, s.db, &last, "read history", `SELECT id, source, event_id, item, at, kind, execution_id,
		retry_of, workflow_id, workflow_name, node, decision, delivery, status, actor, message, error_id
		FROM event_history WHERE source = ? AND event_id = ? AND kind IN ('outcome', 'resolution')
		ORDER BY id DESC LIMIT 1`, root.Source, root.EventID)
	switch {
	case isNoRows(err):
		return a, nil
	case err != nil:
		return a, err
	case last.Kind == KindResolution:
		a.Resolution = "Resolved " + last.Decision + " by " + last.Actor + ": " + last.Message
	default:
		a.Resolution = "Reported " + last.Message
	}
	return a, nil
}
