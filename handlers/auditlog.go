package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/people"
)

// logFilter reads the audit log's filters: actor, action, source, from,
// until (RFC 3339, a date, or the page's datetime-local), cursor, limit.
func logFilter(c *gin.Context) (people.LogFilter, error) {
	f := people.LogFilter{Actor: strings.TrimSpace(c.Query("actor")), Action: strings.TrimSpace(c.Query("action")),
		Source: strings.TrimSpace(c.Query("source")), Cursor: c.Query("cursor")}
	errs := audit.FieldErrors{}
	for name, t := range map[string]*time.Time{"from": &f.From, "until": &f.Until} {
		v := strings.TrimSpace(c.Query(name))
		if v == "" {
			continue
		}
		parsed, ok := parseWhen(v)
		if !ok {
			errs.Add(name, "is not a time (2026-12-06T09:00:00Z, 2026-12-06T09:00 in UTC, or 2026-12-06)")
		}
		*t = parsed
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			errs.Add("limit", "must be a number from 1 to 1000")
		}
		f.Limit = n
	}
	if err := errs.Err(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

func parseWhen(v string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

type logEntryJSON struct {
	people.LogEntry
	EventURL string `json:"event_url,omitempty"`
}

// auditLogAPI answers GET /v1/audit-log: JSON, or CSV with ?format=csv or
// Accept: text/csv.
func (h *Handler) auditLogAPI(c *gin.Context) {
	f, err := logFilter(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	format := c.Query("format")
	switch {
	case format == "" && strings.Contains(c.GetHeader("Accept"), "text/csv"):
		format = "csv"
	case format == "", format == "json", format == "csv":
	default:
		h.fail(c, audit.FieldErrors{"format": "must be json or csv"}.Err())
		return
	}
	page, err := people.Read(c.Request.Context(), h.store, f)
	if err != nil {
		h.fail(c, err)
		return
	}
	if format == "csv" {
		h.auditLogCSV(c, page)
		return
	}
	out := struct {
		Entries    []logEntryJSON `json:"entries"`
		NextCursor string         `json:"next_cursor,omitempty"`
	}{Entries: []logEntryJSON{}, NextCursor: page.Next}
	for _, e := range page.Entries {
		j := logEntryJSON{LogEntry: e}
		if e.EventID != "" {
			j.EventURL = h.links.Event(e.Source, e.EventID)
		}
		out.Entries = append(out.Entries, j)
	}
	c.JSON(http.StatusOK, out)
}

// auditLogCSV answers a page of the audit log as CSV, the next page's
// cursor in X-Next-Cursor.
func (h *Handler) auditLogCSV(c *gin.Context, page people.LogPage) {
	if page.Next != "" {
		c.Header("X-Next-Cursor", page.Next)
	}
	c.Header("Content-Disposition", `attachment; filename="retryaudit-audit-log.csv"`)
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Status(http.StatusOK)
	if err := people.WriteCSV(c.Writer, page.Entries); err != nil {
		h.log.Warn("write the audit log's CSV", "err", err)
	}
}

type auditLogData struct {
	Filter  people.LogFilter
	From    string // the filter's times as the form shows them
	Until   string
	Entries []people.LogEntry
	Next    string // the next page's query string
	CSV     string // this page as CSV: the same filters and cursor
	Actions []string
}

// auditLogPage is the log of who did what, with filters, paged; with
// ?format=csv, the same page as CSV, for the person signed in to the pages.
func (h *Handler) auditLogPage(c *gin.Context) {
	f, err := logFilter(c)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	csv := c.Query("format") == "csv"
	if !csv && c.Query("format") != "" {
		h.pageFail(c, audit.FieldErrors{"format": "must be csv, or left out for the page"}.Err())
		return
	}
	page, err := people.Read(c.Request.Context(), h.store, f)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	if csv {
		h.auditLogCSV(c, page)
		return
	}
	d := auditLogData{Filter: f, Entries: page.Entries, Actions: []string{"resolution", "lookup", "retry",
		people.ActionSignInRefused, "bulk_retry", "slack"}}
	if !f.From.IsZero() {
		d.From = f.From.Format("2006-01-02T15:04")
	}
	if !f.Until.IsZero() {
		d.Until = f.Until.Format("2006-01-02T15:04")
	}
	if page.Next != "" {
		q := c.Request.URL.Query()
		q.Set("cursor", page.Next)
		d.Next = "/audit-log?" + q.Encode()
	}
	q := c.Request.URL.Query()
	q.Set("format", "csv")
	d.CSV = "/audit-log?" + q.Encode()
	h.render(c, http.StatusOK, "auditlog", view{Title: "Audit log", Nav: "auditlog", Data: d})
}
