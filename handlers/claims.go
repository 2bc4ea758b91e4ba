package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

type claimResponse struct {
	Process             bool            `json:"process"`
	Decision            audit.Decision  `json:"decision"`
	Status              audit.Status    `json:"status"`
	Delivery            audit.Delivery  `json:"delivery"`
	Class               audit.Class     `json:"redelivery_class,omitempty"`
	Deliveries          int             `json:"deliveries"`
	HolderExecutionID   string          `json:"holder_execution_id"`
	IdempotencyKey      string          `json:"idempotency_key"`
	EventURL            string          `json:"event_url"`
	FingerprintMismatch bool            `json:"fingerprint_mismatch"`
	Items               []itemClaimJSON `json:"items"`
	LineageNote         string          `json:"lineage_note,omitempty"`
}

type itemClaimJSON struct {
	Item              string         `json:"item"`
	Process           bool           `json:"process"`
	Decision          audit.Decision `json:"decision"`
	Status            audit.Status   `json:"status"`
	HolderExecutionID string         `json:"holder_execution_id"`
	IdempotencyKey    string         `json:"idempotency_key"`
}

// claim answers POST /v1/claims: may this execution act on this event?
func (h *Handler) claim(c *gin.Context) {
	o, ok := h.readObject(c)
	if !ok {
		return
	}
	req := audit.ClaimRequest{
		Source: o.str("source"), EventID: o.str("event_id"), ExecutionID: o.id("execution_id"),
		WorkflowID: o.id("workflow_id"), WorkflowName: o.str("workflow_name"), Node: o.str("node"),
		RetryOf: o.id("retry_of"), Items: o.ids("items"), Fingerprint: o.str("fingerprint"),
		DeliveryID: o.str("delivery_id"), RunStamp: o.str("run_stamp"), Mode: o.str("mode"),
	}
	h.requireWorkflow(o, req.WorkflowID)
	h.qualify(c, o, map[string]*string{"execution_id": &req.ExecutionID, "workflow_id": &req.WorkflowID,
		"retry_of": &req.RetryOf})
	if err := h.invalid(o, req.Validate); err != nil {
		h.fail(c, err)
		return
	}
	res, err := h.store.Claim(c.Request.Context(), req)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Set(logDecision, string(res.Decision))
	out := claimResponse{
		Process: res.Process, Decision: res.Decision, Status: res.Status, Delivery: res.Delivery, Class: res.Class,
		Deliveries: res.Deliveries, HolderExecutionID: res.HolderExecutionID, IdempotencyKey: res.IdempotencyKey,
		EventURL: h.links.Event(req.Source, req.EventID), FingerprintMismatch: res.FingerprintMismatch,
		Items: []itemClaimJSON{}, LineageNote: res.LineageNote,
	}
	for _, it := range res.Items {
		out.Items = append(out.Items, itemClaimJSON(it))
	}
	c.JSON(http.StatusOK, out)
}

// requireWorkflow refuses a claim or outcome without workflow_id, unless
// the configuration allows it: an execution is its workflow and its id.
func (h *Handler) requireWorkflow(o *object, workflowID string) {
	if workflowID == "" && !h.cfg.AllowNoWorkflowID {
		if _, bad := o.errs["workflow_id"]; !bad {
			o.errs.Add("workflow_id", "required ({{ $workflow.id }}); RETRYAUDIT_ALLOW_NO_WORKFLOW_ID=true accepts calls without it")
		}
	}
}

// invalid returns the type errors found while reading the body, merged
// with the domain's validation of the rest, so that one answer names every
// bad field. A body read cleanly returns nil: the store validates it once.
func (h *Handler) invalid(o *object, validate func() error) error {
	if len(o.errs) == 0 {
		return nil
	}
	var e *audit.Error
	if errors.As(validate(), &e) {
		for k, v := range e.Fields {
			o.errs.Add(k, v)
		}
	}
	return o.errs.Err()
}
