package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// The rows of the ledger's tables, one Go type a table: the ledger reads
// them under its locks and writes them from its plan as JSON by name (a
// row set is a JSON array of objects), every other read of a table's rows
// scans its columns into them, and they convert to audit's types.
type (
	eventRow struct {
		Source          string   `json:"source" db:"source"`
		EventID         string   `json:"event_id" db:"event_id"`
		Status          string   `json:"status" db:"status"`
		Holder          string   `json:"holder_execution_id" db:"holder_execution_id"`
		Version         int64    `json:"version" db:"version"`
		ReadVersion     int64    `json:"read_version" db:"-"`
		Review          string   `json:"review_reason" db:"review_reason"`
		ReviewSince     jsonTime `json:"review_since" db:"review_since"`
		CRMRef          string   `json:"crm_ref" db:"crm_ref"`
		ResolvedBy      string   `json:"resolved_by" db:"resolved_by"`
		Alerted         flag     `json:"alerted" db:"alerted"`
		ItemCount       int      `json:"item_count" db:"item_count"`
		Deliveries      int      `json:"deliveries" db:"deliveries"`
		Fingerprint     string   `json:"fingerprint" db:"fingerprint"`
		FirstWorkflow   string   `json:"first_workflow_id" db:"first_workflow_id"`
		LastDeliveryID  string   `json:"last_delivery_id" db:"last_delivery_id"`
		LastPresentedAt jsonTime `json:"last_presented_at" db:"last_presented_at"`
		StaleAlertedAt  jsonTime `json:"stale_alerted_at" db:"stale_alerted_at"`
		CreatedAt       jsonTime `json:"created_at" db:"created_at"`
		UpdatedAt       jsonTime `json:"updated_at" db:"updated_at"`
		LastSeenAt      jsonTime `json:"last_seen_at" db:"last_seen_at"`
	}
	itemRow struct {
		Source      string   `json:"source" db:"source"`
		EventID     string   `json:"event_id" db:"event_id"`
		Item        string   `json:"item" db:"item"`
		Status      string   `json:"status" db:"status"`
		Holder      string   `json:"holder_execution_id" db:"holder_execution_id"`
		Version     int64    `json:"version" db:"version"`
		ReadVersion int64    `json:"read_version" db:"-"`
		Review      string   `json:"review_reason" db:"review_reason"`
		ReviewSince jsonTime `json:"review_since" db:"review_since"`
		CRMRef      string   `json:"crm_ref" db:"crm_ref"`
		ResolvedBy  string   `json:"resolved_by" db:"resolved_by"`
		CreatedAt   jsonTime `json:"created_at" db:"created_at"`
		UpdatedAt   jsonTime `json:"updated_at" db:"updated_at"`
	}
	executionRow struct {
		ID             string   `json:"execution_id" db:"execution_id"`
		N8NID          string   `json:"n8n_id" db:"n8n_id"`
		Incarnation    int      `json:"incarnation" db:"incarnation"`
		WorkflowID     string   `json:"workflow_id" db:"workflow_id"`
		WorkflowName   string   `json:"workflow_name" db:"workflow_name"`
		Mode           string   `json:"mode" db:"mode"`
		RetryOf        string   `json:"retry_of" db:"retry_of"`
		ClaimedRetryOf string   `json:"claimed_retry_of" db:"claimed_retry_of"`
		Root           string   `json:"root_execution_id" db:"root_execution_id"`
		URL            string   `json:"n8n_url" db:"n8n_url"`
		Note           string   `json:"lineage_note" db:"lineage_note"`
		Stamp          string   `json:"run_stamp" db:"run_stamp"`
		StartedAt      jsonTime `json:"started_at" db:"started_at"`
		EndedAt        jsonTime `json:"ended_at" db:"ended_at"`
		CheckedAt      jsonTime `json:"checked_at" db:"checked_at"`
		N8NStatus      string   `json:"n8n_status" db:"n8n_status"`
		FirstSeen      jsonTime `json:"first_seen_at" db:"first_seen_at"`
		LastSeen       jsonTime `json:"last_seen_at" db:"last_seen_at"`
		Superseded     jsonTime `json:"superseded_at" db:"superseded_at"`
		Stored         flag     `json:"stored" db:"-"` // the lock's: the row exists
	}
	presenceRow struct {
		Source      string   `json:"source" db:"source"`
		EventID     string   `json:"event_id" db:"event_id"`
		ExecutionID string   `json:"execution_id" db:"execution_id"`
		Role        string   `json:"role" db:"role"`
		Delivery    string   `json:"delivery" db:"delivery"`
		Acted       flag     `json:"acted" db:"acted"`
		DeliveryID  string   `json:"delivery_id" db:"delivery_id"`
		WorkflowID  string   `json:"workflow_id" db:"workflow_id"`
		Class       string   `json:"class" db:"class"`
		FirstSeen   jsonTime `json:"-" db:"first_seen_at"`
	}
	historyRow struct {
		ID           int64    `json:"-" db:"id"`
		At           jsonTime `json:"-" db:"at"`
		Source       string   `json:"source" db:"source"`
		EventID      string   `json:"event_id" db:"event_id"`
		Item         string   `json:"item" db:"item"`
		Kind         string   `json:"kind" db:"kind"`
		ExecutionID  string   `json:"execution_id" db:"execution_id"`
		RetryOf      string   `json:"retry_of" db:"retry_of"`
		WorkflowID   string   `json:"workflow_id" db:"workflow_id"`
		WorkflowName string   `json:"workflow_name" db:"workflow_name"`
		Node         string   `json:"node" db:"node"`
		Decision     string   `json:"decision" db:"decision"`
		Delivery     string   `json:"delivery" db:"delivery"`
		Class        string   `json:"class" db:"class"`
		Status       string   `json:"status" db:"status"`
		Actor        string   `json:"actor" db:"actor"`
		Message      string   `json:"message" db:"message"`
		CRMRef       string   `json:"crm_ref" db:"crm_ref"`
		ErrorID      *int64   `json:"error_id" db:"error_id"`
		Version      int64    `json:"version" db:"version"`
	}
	// errorRow is an n8n_errors row: one the batch records, or one it read
	// (a duplicate's, one that waited for its claim).
	errorRow struct {
		ID               int64    `json:"id" db:"id"`
		DedupeKey        string   `json:"dedupe_key" db:"dedupe_key"`
		ReceivedAt       jsonTime `json:"received_at" db:"received_at"`
		Kind             string   `json:"kind" db:"kind"`
		ExecutionID      string   `json:"execution_id" db:"execution_id"`
		RetryOf          string   `json:"retry_of" db:"retry_of"`
		Root             string   `json:"root_execution_id" db:"root_execution_id"`
		WorkflowID       string   `json:"workflow_id" db:"workflow_id"`
		WorkflowName     string   `json:"workflow_name" db:"workflow_name"`
		Mode             string   `json:"mode" db:"mode"`
		Node             string   `json:"node" db:"node"`
		Message          string   `json:"message" db:"message"`
		HTTPCode         string   `json:"http_code" db:"http_code"`
		URL              string   `json:"n8n_url" db:"n8n_url"`
		Payload          string   `json:"payload" db:"payload"`
		PayloadTruncated flag     `json:"payload_truncated" db:"payload_truncated"`
		PayloadDropped   flag     `json:"payload_dropped" db:"payload_dropped"`
		Note             string   `json:"intake_note" db:"intake_note"`
		Source           *string  `json:"source" db:"source"`
		EventID          *string  `json:"event_id" db:"event_id"`
	}
	outboxRow struct {
		ID        int64    `json:"-" db:"id"`
		CreatedAt jsonTime `json:"-" db:"created_at"`
		ThreadKey string   `json:"thread_key" db:"thread_key"`
		Kind      string   `json:"kind" db:"kind"`
		Source    string   `json:"source" db:"source"`
		EventID   string   `json:"event_id" db:"event_id"`
		ErrorID   *int64   `json:"error_id" db:"error_id"`
		Payload   string   `json:"payload" db:"payload"`
		State     string   `json:"state" db:"state"`
		LastError string   `json:"last_error" db:"last_error"`
		AlertKind string   `json:"alert_kind" db:"alert_kind"`
		DueAt     jsonTime `json:"due_at" db:"due_at"`
		// Read only, from the notifier's columns.
		Attempts       int      `json:"-" db:"attempts"`
		SentAt         jsonTime `json:"-" db:"sent_at"`
		Channel        string   `json:"-" db:"channel"`
		TS             string   `json:"-" db:"ts"`
		LeaseOwner     string   `json:"-" db:"lease_owner"`
		LeaseUntil     jsonTime `json:"-" db:"lease_until"`
		AttemptedBy    string   `json:"-" db:"attempted_by"`
		FirstAttemptAt jsonTime `json:"-" db:"first_attempt_at"`
		MaybeSent      flag     `json:"-" db:"maybe_sent"`
	}
	counterRow struct {
		Source     string `json:"source" db:"source"`
		WorkflowID string `json:"workflow_id" db:"workflow_id"`
		Metric     string `json:"metric" db:"metric"`
		N          int    `json:"n" db:"n"`
	}
)

// jsonTime is a time in a row set: null for none, written in one fixed UTC
// layout that both databases read and that compares as text on SQLite.
type jsonTime struct{ time.Time }

const jsonTimeLayout = "2006-01-02T15:04:05.000000Z"

func at(t time.Time) jsonTime { return jsonTime{t} }

// MarshalJSON writes null or the fixed layout.
func (t jsonTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(jsonTimeLayout) + `"`), nil
}

// UnmarshalJSON reads null, or a time as either database writes it.
func (t *jsonTime) UnmarshalJSON(b []byte) error {
	var s *string
	if err := json.Unmarshal(b, &s); err != nil || s == nil {
		t.Time = time.Time{}
		return err
	}
	return t.Scan(*s)
}

// Scan reads a column: a time, a time as text (SQLite's; either database's
// in JSON), or NULL.
func (t *jsonTime) Scan(v any) error {
	t.Time = time.Time{}
	switch v := v.(type) {
	case time.Time:
		t.Time = v.UTC()
	case []byte:
		return t.Scan(string(v))
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999Z07:00"} {
			if p, err := time.Parse(layout, v); err == nil {
				t.Time = p.UTC()
				return nil
			}
		}
		return fmt.Errorf("%q is not a time", v)
	case nil:
	default:
		return fmt.Errorf("a time cannot be read from %T", v)
	}
	return nil
}

// flag is a boolean as either database writes it in JSON: true and false,
// or SQLite's 1 and 0.
type flag bool

// UnmarshalJSON reads true, false, 1, 0 or null (false).
func (f *flag) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true", "1":
		*f = true
	case "false", "0", "null":
		*f = false
	default:
		return fmt.Errorf("%s is not a flag", b)
	}
	return nil
}

// Scan reads a column: a boolean, SQLite's 1 or 0, or NULL (false).
func (f *flag) Scan(v any) error {
	switch v := v.(type) {
	case bool:
		*f = flag(v)
	case int64:
		*f = v != 0
	case nil:
		*f = false
	default:
		return fmt.Errorf("a flag cannot be read from %T", v)
	}
	return nil
}

func (r eventRow) entry() *audit.Entry {
	return &audit.Entry{EntryKey: audit.EntryKey{Source: r.Source, EventID: r.EventID}, Status: audit.Status(r.Status),
		Holder: r.Holder, Version: r.Version, Review: r.Review, ReviewSince: r.ReviewSince.Time, CRMRef: r.CRMRef,
		ResolvedBy: r.ResolvedBy, Since: r.UpdatedAt.Time, Created: r.CreatedAt.Time, Alerted: bool(r.Alerted),
		StaleAlertedAt: r.StaleAlertedAt.Time, ItemCount: r.ItemCount, Deliveries: r.Deliveries,
		Fingerprint: r.Fingerprint, FirstWorkflow: r.FirstWorkflow, LastDeliveryID: r.LastDeliveryID,
		LastPresentedAt: r.LastPresentedAt.Time, LastSeen: r.LastSeenAt.Time, Stored: true, ReadVersion: r.Version}
}

func (r itemRow) entry() *audit.Entry {
	return &audit.Entry{EntryKey: audit.EntryKey{Source: r.Source, EventID: r.EventID, Item: r.Item},
		Status: audit.Status(r.Status), Holder: r.Holder, Version: r.Version, Review: r.Review,
		ReviewSince: r.ReviewSince.Time, CRMRef: r.CRMRef, ResolvedBy: r.ResolvedBy, Since: r.UpdatedAt.Time,
		Created: r.CreatedAt.Time, Stored: true, ReadVersion: r.Version}
}

func eventRowOf(e *audit.Entry) eventRow {
	return eventRow{Source: e.Source, EventID: e.EventID, Status: string(e.Status), Holder: e.Holder, Version: e.Version,
		ReadVersion: e.ReadVersion, Review: e.Review, ReviewSince: at(e.ReviewSince), CRMRef: e.CRMRef,
		ResolvedBy: e.ResolvedBy, Alerted: flag(e.Alerted), ItemCount: e.ItemCount, Deliveries: e.Deliveries,
		Fingerprint: e.Fingerprint, FirstWorkflow: e.FirstWorkflow, LastDeliveryID: e.LastDeliveryID,
		LastPresentedAt: at(e.LastPresentedAt), StaleAlertedAt: at(e.StaleAlertedAt), CreatedAt: at(e.Created),
		UpdatedAt: at(e.Since), LastSeenAt: at(e.LastSeen)}
}

func itemRowOf(e *audit.Entry) itemRow {
	return itemRow{Source: e.Source, EventID: e.EventID, Item: e.Item, Status: string(e.Status), Holder: e.Holder,
		Version: e.Version, ReadVersion: e.ReadVersion, Review: e.Review, ReviewSince: at(e.ReviewSince),
		CRMRef: e.CRMRef, ResolvedBy: e.ResolvedBy, CreatedAt: at(e.Created), UpdatedAt: at(e.Since)}
}

func (r executionRow) exec() *audit.Exec {
	return &audit.Exec{ID: r.ID, N8NID: r.N8NID, Incarnation: max(r.Incarnation, 1), WorkflowID: r.WorkflowID,
		WorkflowName: r.WorkflowName, Mode: r.Mode, RetryOf: r.RetryOf, ClaimedRetryOf: r.ClaimedRetryOf, Root: r.Root,
		URL: r.URL, Note: r.Note, Stamp: r.Stamp, StartedAt: r.StartedAt.Time, EndedAt: r.EndedAt.Time,
		CheckedAt: r.CheckedAt.Time, N8NStatus: r.N8NStatus, FirstSeen: r.FirstSeen.Time, LastSeen: r.LastSeen.Time,
		Superseded: !r.Superseded.IsZero(), Stored: true}
}

func executionRowOf(x *audit.Exec, now time.Time) executionRow {
	r := executionRow{ID: x.ID, N8NID: x.N8NID, Incarnation: x.Incarnation, WorkflowID: x.WorkflowID,
		WorkflowName: x.WorkflowName, Mode: x.Mode, RetryOf: x.RetryOf, ClaimedRetryOf: x.ClaimedRetryOf, Root: x.Root,
		URL: x.URL, Note: x.Note, Stamp: x.Stamp, StartedAt: at(x.StartedAt), EndedAt: at(x.EndedAt),
		CheckedAt: at(x.CheckedAt), N8NStatus: x.N8NStatus, FirstSeen: at(x.FirstSeen), LastSeen: at(x.LastSeen),
		Stored: flag(x.Stored)}
	if x.Superseded {
		r.Superseded = at(now)
	}
	return r
}

func (r presenceRow) presence() audit.Presence {
	return audit.Presence{Key: audit.EventKey{Source: r.Source, EventID: r.EventID}, ExecutionID: r.ExecutionID,
		Role: r.Role, Delivery: audit.Delivery(r.Delivery), Acted: bool(r.Acted), DeliveryID: r.DeliveryID,
		WorkflowID: r.WorkflowID, Class: audit.Class(r.Class)}
}

func presenceRowOf(p *audit.Presence) presenceRow {
	return presenceRow{Source: p.Key.Source, EventID: p.Key.EventID, ExecutionID: p.ExecutionID, Role: p.Role,
		Delivery: string(p.Delivery), Acted: flag(p.Acted), DeliveryID: p.DeliveryID, WorkflowID: p.WorkflowID,
		Class: string(p.Class)}
}

func (r errorRow) record() audit.N8NErrorRecord {
	e := audit.N8NErrorRecord{ID: r.ID, DedupeKey: r.DedupeKey, ReceivedAt: r.ReceivedAt.Time, Kind: r.Kind,
		ExecutionID: r.ExecutionID, RetryOf: r.RetryOf, Root: r.Root, WorkflowID: r.WorkflowID,
		WorkflowName: r.WorkflowName, Mode: r.Mode, Node: r.Node, Message: r.Message, HTTPCode: r.HTTPCode, URL: r.URL,
		Payload: r.Payload, PayloadTruncated: bool(r.PayloadTruncated), PayloadDropped: bool(r.PayloadDropped),
		Note: r.Note}
	if r.Source != nil && r.EventID != nil {
		e.LinkedSource.String, e.LinkedSource.Valid = *r.Source, true
		e.LinkedEventID.String, e.LinkedEventID.Valid = *r.EventID, true
	}
	return e
}

func historyRowOf(l audit.Line) historyRow {
	h := l.HistoryLine
	return historyRow{Source: h.Source, EventID: h.EventID, Item: h.Item, Kind: h.Kind, ExecutionID: h.ExecutionID,
		RetryOf: h.RetryOf, WorkflowID: h.WorkflowID, WorkflowName: h.WorkflowName, Node: h.Node, Decision: h.Decision,
		Delivery: h.Delivery, Class: h.Class, Status: h.Status, Actor: h.Actor, Message: h.Message, CRMRef: h.CRMRef,
		ErrorID: h.ErrorID, Version: l.Version}
}

func (r historyRow) line() audit.HistoryLine {
	return audit.HistoryLine{ID: r.ID, Source: r.Source, EventID: r.EventID, Item: r.Item, At: r.At.Time, Kind: r.Kind,
		ExecutionID: r.ExecutionID, RetryOf: r.RetryOf, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
		Node: r.Node, Decision: r.Decision, Delivery: r.Delivery, Class: r.Class, Status: r.Status, Actor: r.Actor,
		Message: r.Message, CRMRef: r.CRMRef, ErrorID: r.ErrorID, Version: r.Version}
}

func (r outboxRow) message() audit.OutboxRow {
	m := audit.OutboxRow{ID: r.ID, CreatedAt: r.CreatedAt.Time, DueAt: r.DueAt.Time, ThreadKey: r.ThreadKey,
		Kind: r.Kind, Source: r.Source, EventID: r.EventID, Payload: r.Payload, State: r.State, Attempts: r.Attempts,
		LastError: r.LastError, LeaseOwner: r.LeaseOwner, Destination: r.Channel, MessageID: r.TS,
		AttemptedBy: r.AttemptedBy, MaybeSent: bool(r.MaybeSent)}
	if r.ErrorID != nil {
		m.ErrorID.Int64, m.ErrorID.Valid = *r.ErrorID, true
	}
	m.SentAt.Time, m.SentAt.Valid = r.SentAt.Time, !r.SentAt.IsZero()
	m.FirstAttemptAt.Time, m.FirstAttemptAt.Valid = r.FirstAttemptAt.Time, !r.FirstAttemptAt.IsZero()
	return m
}
