package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
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
}

// n8nError answers POST /v1/n8n/errors: the Error Trigger's item, as n8n
// emits it. Any JSON object is recorded (202, or 200 for one seen before);
// only a body that is not a JSON object is refused, because an error
// workflow that fails in its turn tells nobody.
func (h *Handler) n8nError(c *gin.Context) {
	raw, ok := h.readBody(c)
	if !ok {
		return
	}
	var v map[string]any
	if err := decodeOne(raw, &v); err != nil || v == nil {
		h.apiError(c, http.StatusBadRequest, "invalid_json",
			"the body must be one JSON object, as n8n's Error Trigger emits it: "+jsonProblem(err), nil)
		return
	}
	res, err := h.store.RecordError(c.Request.Context(), audit.ParseErrorPayload(raw, v))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Set(logDecision, res.Kind)
	out := errorIntakeResponse{Recorded: true, Duplicate: res.Duplicate, Kind: res.Kind, ErrorID: res.ID,
		ErrorURL: h.links.Error(res.ID), ExecutionID: optional(res.ExecutionID), RetryOf: optional(res.RetryOf),
		LinkedEvent: res.Linked}
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
