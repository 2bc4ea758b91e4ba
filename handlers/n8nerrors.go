package handlers

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/n8n"
)

type errorIntakeResponse struct {
	Recorded    bool            `json:"recorded"`
	Duplicate   bool            `json:"duplicate"`
	Kind        string          `json:"kind"`
	ErrorID     int64           `json:"error_id"`
	ErrorURL    string          `json:"error_url"`
	ExecutionID *string         `json:"execution_id"`
	RetryOf     *string         `json:"retry_of"`
	LinkedEvent *audit.EventKey `json:"linked_event"`
	EventURL    string          `json:"event_url,omitempty"`
	Note        string          `json:"note,omitempty"`
}

// n8nError answers POST /v1/n8n/errors: the Error Trigger's item, as n8n
// emits it. Any JSON object is recorded (202, or 200 for one seen before);
// only a body that is not a JSON object is refused, because an error
// workflow that fails in its turn tells nobody.
func (h *Handler) n8nError(c *gin.Context) {
	b, err := readErrorBody(c.Request.Body, h.cfg.MaxErrorBody)
	if err != nil {
		problem := jsonProblem(err)
		if errors.Is(err, errNotObject) {
			problem = "it is not an object"
		}
		h.apiError(c, http.StatusBadRequest, "invalid_json",
			"the body must be one JSON object, as n8n's Error Trigger emits it: "+problem, nil)
		return
	}
	refused := h.refusedIDs(b.value, b.visible)
	r := n8n.ParseErrorTriggerBody(b.sum, b.value)
	for _, p := range payloadIDs {
		if problem, ok := refused[p.field]; ok {
			r.RefuseID(p.field, problem, b.sum)
		}
	}
	r.OfInstance(c.GetString(ctxInstance))
	if b.visible {
		r.AddNote(audit.NoteVisible)
	}
	switch {
	case b.cut:
		r.Truncated = true
		r.AddNote(fmt.Sprintf("the body was larger than %s (RETRYAUDIT_MAX_ERROR_BODY): only its first %s were read; "+
			"the summary is what they held", sizeText(h.cfg.MaxErrorBody), sizeText(h.cfg.MaxErrorBody)))
	case b.size > h.cfg.MaxBody:
		r.Truncated = true
		r.AddNote(fmt.Sprintf("the body was %s, over RETRYAUDIT_MAX_BODY (%s): recorded with its summary, the payload cut",
			sizeText(b.size), sizeText(h.cfg.MaxBody)))
	case b.pruned:
		r.Truncated = true
	}
	res, err := h.store.RecordError(c.Request.Context(), r)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Set(logDecision, res.Kind)
	out := errorIntakeResponse{Recorded: true, Duplicate: res.Duplicate, Kind: res.Kind, ErrorID: res.ID,
		ErrorURL: h.links.Error(res.ID), ExecutionID: optional(res.ExecutionID), RetryOf: optional(res.RetryOf),
		LinkedEvent: res.Linked, Note: r.Note}
	if res.Linked != nil {
		out.EventURL = h.links.Event(res.Linked.Source, res.Linked.EventID)
	}
	code := http.StatusAccepted
	if res.Duplicate {
		code = http.StatusOK
	}
	c.JSON(code, out)
}

// optional turns "" into a JSON null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// sizeText writes a byte count as people read it: 2.0 MiB, 512 KiB, 900 B.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
