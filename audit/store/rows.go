package store

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// The rows the ledger reads under its locks and writes from its plan, one
// Go type a table, read and written as JSON by name (a batch's row set is
// one JSON array of objects; a read returns one per table).
type (
	eventRow struct {
		Source          string   `json:"source"`
		EventID         string   `json:"event_id"`
		Status          string   `json:"status"`
		Holder          string   `json:"holder_execution_id"`
		Version         int64    `json:"version"`
		ReadVersion     int64    `json:"read_version"`
		Review          string   `json:"review_reason"`
		ReviewSince     jsonTime `json:"review_since"`
		CRMRef          string   `json:"crm_ref"`
		ResolvedBy      string   `json:"resolved_by"`
		Alerted         flag     `json:"alerted"`
		ItemCount       int      `json:"item_count"`
		Deliveries      int      `json:"deliveries"`
		Fingerprint     string   `json:"fingerprint"`
		FirstWorkflow   string   `json:"first_workflow_id"`
		LastDeliveryID  string   `json:"last_delivery_id"`
		LastPresentedAt jsonTime `json:"last_presented_at"`
		StaleAlertedAt  jsonTime `json:"stale_alerted_at"`
		CreatedAt       jsonTime `json:"created_at"`
		UpdatedAt       jsonTime `json:"updated_at"`
		LastSeenAt      jsonTime `json:"last_seen_at"`
	}
	itemRow struct {
		Source      string   `json:"source"`
		EventID     string   `json:"event_id"`
		Item        string   `json:"item"`
		Status      string   `json:"status"`
		Holder      string   `json:"holder_execution_id"`
		Version     int64    `json:"version"`
		ReadVersion int64    `json:"read_version"`
		Review      string   `json:"review_reason"`
		ReviewSince jsonTime `json:"review_since"`
		CRMRef      string   `json:"crm_ref"`
		ResolvedBy  string   `json:"resolved_by"`
		CreatedAt   jsonTime `json:"created_at"`
		UpdatedAt   jsonTime `json:"updated_at"`
	}
	executionRow struct {
		ID             string   `json:"execution_id"`
		N8NID          string   `json:"n8n_id"`
		Incarnation    int      `json:"incarnation"`
		WorkflowID     string   `json:"workflow_id"`
		WorkflowName   string   `json:"workflow_name"`
		Mode           string   `json:"mode"`
		RetryOf        string   `json:"retry_of"`
		ClaimedRetryOf string   `json:"claimed_retry_of"`
		Root           string   `json:"root_execution_id"`
		URL            string   `json:"n8n_url"`
		Note           string   `json:"lineage_note"`
		Stamp          string   `json:"run_stamp"`
		StartedAt      jsonTime `json:"started_at"`
		EndedAt        jsonTime `json:"ended_at"`
		CheckedAt      jsonTime `json:"checked_at"`
		N8NStatus      string   `json:"n8n_status"`
		FirstSeen      jsonTime `json:"first_seen_at"`
		LastSeen       jsonTime `json:"last_seen_at"`
		Superseded     jsonTime `json:"superseded_at"`
		Stored         flag     `json:"stored"`
	}
	presenceRow struct {
		Source      string `json:"source"`
		EventID     string `json:"event_id"`
		ExecutionID string `json:"execution_id"`
		Role        string `json:"role"`
		Delivery    string `json:"delivery"`
		Acted       flag   `json:"acted"`
		DeliveryID  string `json:"delivery_id"`
		WorkflowID  string `json:"workflow_id"`
		Class       string `json:"class"`
	}
	historyRow struct {
		Source       string `json:"source"`
		EventID      string `json:"event_id"`
		Item         string `json:"item"`
		Kind         string `json:"kind"`
		ExecutionID  string `json:"execution_id"`
		RetryOf      string `json:"retry_of"`
		WorkflowID   string `json:"workflow_id"`
		WorkflowName string `json:"workflow_name"`
		Node         string `json:"node"`
		Decision     string `json:"decision"`
		Delivery     string `json:"delivery"`
		Class        string `json:"class"`
		Status       string `json:"status"`
		Actor        string `json:"actor"`
		Message      string `json:"message"`
		CRMRef       string `json:"crm_ref"`
		ErrorID      *int64 `json:"error_id"`
		Version      int64  `json:"version"`
	}
	// errorRow is an n8n_errors row: one the batch records, or one it read
	// (a duplicate's, one that waited for its claim).
	errorRow struct {
		ID               int64    `json:"id"`
		DedupeKey        string   `json:"dedupe_key"`
		ReceivedAt       jsonTime `json:"received_at"`
		Kind             string   `json:"kind"`
		ExecutionID      string   `json:"execution_id"`
		RetryOf          string   `json:"retry_of"`
		Root             string   `json:"root_execution_id"`
		WorkflowID       string   `json:"workflow_id"`
		WorkflowName     string   `json:"workflow_name"`
		Mode             string   `json:"mode"`
		Node             string   `json:"node"`
		Message          string   `json:"message"`
		HTTPCode         string   `json:"http_code"`
		URL              string   `json:"n8n_url"`
		Payload          string   `json:"payload"`
		PayloadTruncated flag     `json:"payload_truncated"`
		PayloadDropped   flag     `json:"payload_dropped"`
		Note             string   `json:"intake_note"`
		Source           *string  `json:"source"`
		EventID          *string  `json:"event_id"`
	}
	outboxRow struct {
		ThreadKey string   `json:"thread_key"`
		Kind      string   `json:"kind"`
		Source    string   `json:"source"`
		EventID   string   `json:"event_id"`
		ErrorID   *int64   `json:"error_id"`
		Payload   string   `json:"payload"`
		State     string   `json:"state"`
		LastError string   `json:"last_error"`
		AlertKind string   `json:"alert_kind"`
		DueAt     jsonTime `json:"due_at"`
	}
	counterRow struct {
		Source     string `json:"source"`
		WorkflowID string `json:"workflow_id"`
		Metric     string `json:"metric"`
		N          int    `json:"n"`
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
	if bytes.Equal(b, []byte("null")) {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999Z07:00"} {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v.UTC()
			return nil
		}
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	t.Time = v
	return err
}

// flag is a boolean as either database writes it in JSON: true and false,
// or SQLite's 1 and 0.
type flag bool

// UnmarshalJSON reads true, false, 1 or 0.
func (f *flag) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true", "1":
		*f = true
	case "false", "0", "null":
		*f = false
	default:
		var v bool
		err := json.Unmarshal(b, &v)
		*f = flag(v)
		return err
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
