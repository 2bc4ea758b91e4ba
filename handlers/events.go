package handlers

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

type eventJSON struct {
	Source            string       `json:"source"`
	EventID           string       `json:"event_id"`
	Status            audit.Status `json:"status"`
	NeedsReview       bool         `json:"needs_review"`
	ReviewReason      string       `json:"review_reason,omitempty"`
	CreatedAt         time.Time    `json:"created_at"`
	UpdatedAt         time.Time    `json:"updated_at"`
	LastSeenAt        time.Time    `json:"last_seen_at"`
	HolderExecutionID string       `json:"holder_execution_id"`
	Deliveries        int          `json:"deliveries"`
	IdempotencyKey    string       `json:"idempotency_key"`
	Fingerprint       string       `json:"fingerprint,omitempty"`
	CRMRef            string       `json:"crm_ref,omitempty"`
	EventURL          string       `json:"event_url"`
	CRMURL            string       `json:"crm_url,omitempty"`
	// Version changes with every transition; ResolvedBy names the person
	// who settled it last.
	Version    int64  `json:"version"`
	ResolvedBy string `json:"resolved_by,omitempty"`
}

type eventDetailJSON struct {
	eventJSON
	Items []itemJSON `json:"items"`
	// History is one page, newest first; history_next_cursor continues it.
	History         []audit.HistoryLine `json:"history"`
	HistoryNext     string              `json:"history_next_cursor,omitempty"`
	HistoryTotal    int                 `json:"history_total"`
	HistoryCounts   map[string]int      `json:"history_counts"`
	ExecutionsTotal int                 `json:"executions_total"`
	ErrorsTotal     int                 `json:"errors_total"`
	AlertsTotal     int                 `json:"alerts_total"`
	Executions      []executionJSON     `json:"executions"`
	Errors          []errorJSON         `json:"errors"`
	Alerts          []alertJSON         `json:"alerts"`
}

type itemJSON struct {
	Item              string       `json:"item"`
	Status            audit.Status `json:"status"`
	HolderExecutionID string       `json:"holder_execution_id"`
	CRMRef            string       `json:"crm_ref,omitempty"`
	ReviewReason      string       `json:"review_reason,omitempty"`
	IdempotencyKey    string       `json:"idempotency_key"`
	UpdatedAt         time.Time    `json:"updated_at"`
	Version           int64        `json:"version"`
}

type executionJSON struct {
	ExecutionID  string `json:"execution_id"`
	WorkflowID   string `json:"workflow_id,omitempty"`
	WorkflowName string `json:"workflow_name,omitempty"`
	Mode         string `json:"mode,omitempty"`
	RetryOf      string `json:"retry_of,omitempty"`
	Root         string `json:"root_execution_id"`
	Role         string `json:"role"`
	Delivery     string `json:"delivery,omitempty"`
	Class        string `json:"redelivery_class,omitempty"`
	DeliveryID   string `json:"delivery_id,omitempty"`
	N8NURL       string `json:"n8n_url,omitempty"` // built from the configured editor URL only
	// ReportedURL is the address n8n's error payload carried
	// (execution.url): text, not checked, never a link of ours.
	ReportedURL string `json:"reported_url,omitempty"`
	Note        string `json:"lineage_note,omitempty"`
}

type errorJSON struct {
	ID          int64     `json:"id"`
	Kind        string    `json:"kind"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Node        string    `json:"node,omitempty"`
	Message     string    `json:"message"`
	ReceivedAt  time.Time `json:"received_at"`
	URL         string    `json:"error_url"`
}

type alertJSON struct {
	ID   int64  `json:"id"`
	Kind string `json:"kind"` // its role in the thread: alert, followup, refresh
	// AlertKind, Source and EventID are what the message is about, as it
	// will be rendered for Slack.
	AlertKind string    `json:"alert_kind"`
	Source    string    `json:"source,omitempty"`
	EventID   string    `json:"event_id,omitempty"`
	State     string    `json:"state"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func (h *Handler) eventJSON(e audit.Event) eventJSON {
	return eventJSON{
		Source: e.Source, EventID: e.EventID, Status: e.Status, NeedsReview: e.NeedsReview,
		ReviewReason: e.Review, CreatedAt: e.Created, UpdatedAt: e.Since, LastSeenAt: e.LastSeen,
		HolderExecutionID: e.Holder, Deliveries: e.Deliveries,
		IdempotencyKey: audit.IdempotencyKey(e.Source, e.EventID, ""), Fingerprint: e.Fingerprint,
		CRMRef: e.CRMRef, EventURL: h.links.Event(e.Source, e.EventID),
		CRMURL: h.links.CRMOrder(e.Source, e.EventID, "", e.CRMRef), Version: e.Version, ResolvedBy: e.ResolvedBy,
	}
}

// getEvent answers GET /v1/events/{source}/{event_id}.
func (h *Handler) getEvent(c *gin.Context) {
	source, eventID := eventKey(c)
	if err := audit.ValidateKey(source, eventID); err != nil {
		h.fail(c, err)
		return
	}
	page, err := historyPage(c, "history_cursor", "history_limit")
	if err != nil {
		h.fail(c, err)
		return
	}
	d, err := h.store.EventPage(c.Request.Context(), source, eventID, page)
	if err != nil {
		h.fail(c, err)
		return
	}
	slices.Reverse(d.History)
	out := eventDetailJSON{eventJSON: h.eventJSON(d.Event), Items: []itemJSON{}, History: d.History,
		HistoryTotal: d.HistoryTotal, HistoryCounts: d.HistoryCounts, ExecutionsTotal: d.ExecutionsTotal,
		ErrorsTotal: d.ErrorsTotal, AlertsTotal: d.AlertsTotal,
		Executions: []executionJSON{}, Errors: []errorJSON{}, Alerts: []alertJSON{}}
	if d.HistoryNext > 0 {
		out.HistoryNext = strconv.FormatInt(d.HistoryNext, 10)
	}
	for _, it := range d.Items {
		out.Items = append(out.Items, itemJSON{Item: it.Item, Status: it.Status, HolderExecutionID: it.Holder,
			CRMRef: it.CRMRef, ReviewReason: it.Review, UpdatedAt: it.Since, Version: it.Version,
			IdempotencyKey: audit.IdempotencyKey(source, eventID, it.Item)})
	}
	for _, x := range d.Executions {
		out.Executions = append(out.Executions, executionJSON{ExecutionID: x.ID, WorkflowID: x.WorkflowID,
			WorkflowName: x.WorkflowName, Mode: x.Mode, RetryOf: x.RetryOf, Root: x.Root, Role: x.Presence.Role,
			Delivery: string(x.Presence.Delivery), Class: string(x.Presence.Class), DeliveryID: x.Presence.DeliveryID, N8NURL: h.links.N8NExecution(x.WorkflowID, x.ID),
			ReportedURL: x.URL, Note: x.Note})
	}
	for _, e := range d.Errors {
		out.Errors = append(out.Errors, errorJSON{ID: e.ID, Kind: e.Kind, ExecutionID: e.ExecutionID, Node: e.Node,
			Message: e.Message, ReceivedAt: e.ReceivedAt, URL: h.links.Error(e.ID)})
	}
	for _, a := range d.Alerts {
		var about audit.Alert
		json.Unmarshal([]byte(a.Payload), &about) // written by the store: a row it cannot read says nothing
		out.Alerts = append(out.Alerts, alertJSON{ID: a.ID, Kind: a.Kind, AlertKind: about.Kind,
			Source: about.Source, EventID: about.EventID, State: a.State, Attempts: a.Attempts,
			LastError: a.LastError, CreatedAt: a.CreatedAt})
	}
	if out.History == nil {
		out.History = []audit.HistoryLine{}
	}
	c.JSON(http.StatusOK, out)
}

// historyPage reads the history cursor and page size from the query.
func historyPage(c *gin.Context, cursorName, limitName string) (audit.HistoryPage, error) {
	errs := audit.FieldErrors{}
	var p audit.HistoryPage
	if v := c.Query(cursorName); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs.Add(cursorName, "not a cursor this service returned")
		}
		p.Before = n
	}
	if v := c.Query(limitName); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			errs.Add(limitName, "must be a number from 1 to 500")
		}
		p.Limit = n
	}
	return p, errs.Err()
}

// eventKey reads {source} and {event_id} from the path. The event id is a
// catch-all, so it may be sent with its '/' escaped or not.
func eventKey(c *gin.Context) (string, string) {
	source, eventID := c.Param("source"), strings.TrimPrefix(c.Param("event_id"), "/")
	if source == audit.EncodedKeyMark {
		if s, id, ok := audit.DecodeEventPath(eventID); ok {
			return s, id
		}
	}
	return source, eventID
}

// listEvents answers GET /v1/events?source=&status=&older_than=&needs_review=&prefix=&cursor=&limit=.
func (h *Handler) listEvents(c *gin.Context) {
	f, err := h.eventFilter(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	page, err := h.store.Events(c.Request.Context(), f)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := struct {
		Events     []eventJSON `json:"events"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}{Events: []eventJSON{}, NextCursor: page.Next}
	for _, e := range page.Events {
		out.Events = append(out.Events, h.eventJSON(e))
	}
	c.JSON(http.StatusOK, out)
}

// eventFilter reads the list filters shared by the API and the pages.
func (h *Handler) eventFilter(c *gin.Context) (audit.EventFilter, error) {
	errs := audit.FieldErrors{}
	f := audit.EventFilter{
		Source: c.Query("source"), Status: audit.Status(c.Query("status")), Prefix: c.Query("prefix"),
		Cursor: c.Query("cursor"), Instance: c.Query("instance"),
	}
	if v := c.Query("older_than"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs.Add("older_than", "must be a duration such as 15m or 2h")
		}
		f.OlderThan = d
	}
	if v := c.Query("needs_review"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs.Add("needs_review", "must be true or false")
		}
		f.NeedsReview = b
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			errs.Add("limit", "must be a number from 1 to 500")
		}
		f.Limit = n
	}
	if e, ok := f.Validate().(*audit.Error); ok {
		for k, v := range e.Fields {
			errs.Add(k, v)
		}
	} else if f.Instance != "" && f.Instance != audit.DefaultInstance && !h.links.KnownInstance(f.Instance) {
		errs.Add("instance", "no n8n instance is named "+f.Instance)
	}
	return f, errs.Err()
}
