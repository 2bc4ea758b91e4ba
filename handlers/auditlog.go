package handlers

import (
	"bytes"
	"context"
	"io"
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
	if format == "csv" {
		h.auditLogCSV(c, f, h.fail)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), h.apiTimeLimit())
	defer cancel()
	page, err := people.Read(ctx, h.store, f)
	if err != nil {
		h.fail(c, err)
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

// auditLogCSV answers the log as CSV, as a file: with limit, that many
// entries and the cursor of the rest in X-Next-Cursor; without, every
// entry the filters select, streamed, each read of 1,000 within the API's
// timeout and each write within a minute, however long the whole takes.
// An error before the first row is answered as one; a read that fails
// later aborts the response, so that a cut file never arrives as a whole
// one.
func (h *Handler) auditLogCSV(c *gin.Context, f people.LogFilter, fail func(*gin.Context, error)) {
	var page bytes.Buffer
	w := io.Writer(&page)
	stream := &csvStream{c: c, rc: http.NewResponseController(c.Writer)}
	if f.Limit == 0 {
		w = stream
	}
	next, err := people.Export(c.Request.Context(), h.store, f, w, h.apiTimeLimit())
	switch {
	case err != nil && !stream.started:
		fail(c, err)
	case err != nil:
		h.log.Warn("the audit log's CSV was cut short: the connection is closed so that it cannot pass as whole",
			"err", err)
		panic(http.ErrAbortHandler)
	default:
		if next != "" {
			c.Header("X-Next-Cursor", next)
		}
		stream.Write(page.Bytes())
	}
}

// csvStream sends the CSV file's headers with its first bytes, and gives
// every write a minute of its own (the server's write timeout bounds a
// whole response).
type csvStream struct {
	c       *gin.Context
	rc      *http.ResponseController
	started bool
}

func (w *csvStream) Write(p []byte) (int, error) {
	if !w.started {
		w.started = true
		w.c.Header("Content-Disposition", `attachment; filename="retryaudit-audit-log.csv"`)
		w.c.Header("Content-Type", "text/csv; charset=utf-8")
		w.c.Status(http.StatusOK)
	}
	w.rc.SetWriteDeadline(time.Now().Add(time.Minute)) // not supported: the server's timeout stands
	return w.c.Writer.Write(p)
}

type auditLogData struct {
	Filter  people.LogFilter
	From    string // the filter's times as the form shows them
	Until   string
	Entries []people.LogEntry
	Next    string // the next page's query string
	CSV     string // every entry the filters select, as CSV
	Actions []string
}

// auditLogPage is the log of who did what, with filters, paged; with
// ?format=csv, every entry the filters select as CSV (or limit of them from
// cursor), for the person signed in to the pages.
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
	if csv {
		h.auditLogCSV(c, f, h.pageFail)
		return
	}
	page, err := people.Read(c.Request.Context(), h.store, f)
	if err != nil {
		h.pageFail(c, err)
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
	q.Del("cursor")
	q.Del("limit")
	d.CSV = "/audit-log?" + q.Encode()
	h.render(c, http.StatusOK, "auditlog", view{Title: "Audit log", Nav: "auditlog", Data: d})
}
