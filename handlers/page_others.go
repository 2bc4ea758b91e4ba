package handlers

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

type reviewData struct {
	Cards       []reviewCard
	ReviewAfter string
}

// reviewCard is an entry of the review queue, with its CRM lookup (nil
// when its source has none).
type reviewCard struct {
	audit.Event
	ID     string // its anchor
	Lookup *lookupView
	// Prefill is the resolve form as the newest lookup fills it.
	Prefill resolveForm
}

// reviewPage lists the entries waiting for a person, oldest first, each
// with its resolution form.
func (h *Handler) reviewPage(c *gin.Context) {
	events, err := h.store.ReviewQueue(c.Request.Context(), 200)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	d := reviewData{ReviewAfter: shortDuration(h.store.ReviewAfter())}
	for _, ev := range events {
		card := reviewCard{Event: ev, ID: cardID(ev.Source, ev.EventID)}
		if card.Lookup, err = h.lookupFor(c.Request.Context(), ev, ev.ItemCount == 0); err != nil {
			h.pageFail(c, err)
			return
		}
		if card.Lookup != nil && card.Lookup.Resolve != nil {
			f := card.Lookup.Resolve
			card.Prefill = resolveForm{To: f.To, Note: f.Note, CRMRef: f.CRMRef}
		}
		d.Cards = append(d.Cards, card)
	}
	notice := ""
	if c.Query("looked") != "" {
		notice = "Looked up in the CRM: the answer is on the event's card."
	}
	h.render(c, http.StatusOK, "review", view{Title: "Review", Nav: "review", Notice: notice, Data: d})
}

// shortDuration writes 15m for 15m0s and 2h for 2h0m0s.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

type executionData struct {
	audit.Exec
	N8N    n8nLink
	Up     []audit.Exec
	Down   []audit.Exec
	Events []audit.TouchedEvent
	Errors []audit.N8NErrorRecord
}

// executionPage shows one execution: its events, what it retries (up to
// the root) and what retries it.
func (h *Handler) executionPage(c *gin.Context) {
	ctx := c.Request.Context()
	id := c.Param("id")
	if key := c.Param("key"); key != "" {
		raw, err := base64.RawURLEncoding.DecodeString(key)
		if err != nil {
			h.pageError(c, http.StatusNotFound, "Not found", "There is no such execution.")
			return
		}
		id = string(raw)
	}
	x, up, down, err := h.store.Lineage(ctx, id)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	d := executionData{Exec: x, N8N: h.n8nLink(x.WorkflowID, x.ID, x.URL), Up: up, Down: down}
	if d.Events, err = h.store.ExecutionEvents(ctx, id); err != nil {
		h.pageFail(c, err)
		return
	}
	if d.Errors, err = h.store.ExecutionErrors(ctx, id); err != nil {
		h.pageFail(c, err)
		return
	}
	h.render(c, http.StatusOK, "execution", view{Title: "Execution " + id, Nav: "events", Data: d})
}

type errorsData struct {
	Kind   string
	Errors []audit.N8NErrorRecord
	Counts map[string]int
	Tests  []audit.N8NErrorRecord // the editor's test payloads, shown apart
	Next   int64
}

// errorsPage lists every error received, newest first.
func (h *Handler) errorsPage(c *gin.Context) {
	ctx := c.Request.Context()
	kind := c.Query("kind")
	switch kind {
	case "", audit.N8NErrorExecution, audit.N8NErrorTrigger, audit.N8NErrorUnknown, audit.N8NErrorTest, audit.N8NErrorReconcile, audit.N8NErrorHook:
	default:
		h.pageError(c, http.StatusUnprocessableEntity, "Invalid request", "There is no kind of error called that.")
		return
	}
	before, _ := strconv.ParseInt(c.Query("before"), 10, 64)
	d := errorsData{Kind: kind}
	var err error
	if d.Errors, d.Next, err = h.store.Errors(ctx, audit.N8NErrorFilter{Kind: kind, Before: before, Limit: 50}); err != nil {
		h.pageFail(c, err)
		return
	}
	if d.Counts, err = h.store.ErrorCounts(ctx); err != nil {
		h.pageFail(c, err)
		return
	}
	if kind == "" && before == 0 {
		if d.Tests, _, err = h.store.Errors(ctx, audit.N8NErrorFilter{Kind: audit.N8NErrorTest, Limit: 3}); err != nil {
			h.pageFail(c, err)
			return
		}
	}
	h.render(c, http.StatusOK, "errors", view{Title: "Errors", Nav: "errors", Data: d})
}

// n8nLink is an execution's link into n8n's editor, built from the
// configuration only; without one, why not, and the address the error
// payload carried, to show as text.
type n8nLink struct {
	URL, Why, Reported string
}

func (h *Handler) n8nLink(workflowID, executionID, reported string) n8nLink {
	if u := h.links.N8NExecution(workflowID, executionID); u != "" {
		return n8nLink{URL: u}
	}
	return n8nLink{Why: h.links.NoN8NLink(workflowID, executionID), Reported: audit.Truncate(reported, 500)}
}

type errorData struct {
	audit.N8NErrorRecord
	N8N   n8nLink
	Event *audit.EventKey
}

// errorPage shows one error with its raw payload (credentials redacted at
// intake). Alerts about an error that links to no event point here.
func (h *Handler) errorPage(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		h.pageError(c, http.StatusNotFound, "Not found", "There is no such error.")
		return
	}
	e, err := h.store.Error(c.Request.Context(), id)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	d := errorData{N8NErrorRecord: e, N8N: h.n8nLink(e.WorkflowID, e.ExecutionID, e.URL)}
	if ev, ok := e.Linked(); ok {
		d.Event = &ev
	}
	h.render(c, http.StatusOK, "error", view{Title: "Error #" + c.Param("id"), Nav: "errors", Data: d})
}
