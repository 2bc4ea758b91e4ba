package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

// outcome answers POST /v1/outcomes: what happened after the action.
func (h *Handler) outcome(c *gin.Context) {
	o, ok := h.readObject(c)
	if !ok {
		return
	}
	req := audit.OutcomeRequest{
		Source: o.str("source"), EventID: o.str("event_id"), Item: o.id("item"),
		Outcome: audit.Outcome(o.str("outcome")), ExecutionID: o.id("execution_id"), WorkflowID: o.id("workflow_id"),
		Reason: o.text("reason"), CRMRef: o.id("crm_ref"), RunStamp: o.str("run_stamp"), Mode: o.str("mode"),
	}
	h.requireWorkflow(o, req.WorkflowID)
	h.qualify(c, o, map[string]*string{"execution_id": &req.ExecutionID, "workflow_id": &req.WorkflowID})
	if err := h.invalid(o, req.Validate); err != nil {
		h.fail(c, err)
		return
	}
	res, err := h.store.ReportOutcome(c.Request.Context(), req)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Set(logDecision, string(req.Outcome))
	c.JSON(http.StatusOK, gin.H{
		"changed": res.Changed, "status": res.Status, "needs_review": res.NeedsReview,
		"event_url": h.links.Event(req.Source, req.EventID),
	})
}
