package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/retries"
)

// The retry endpoints are a person's acts: they take the pages' sign-in
// (HTTP Basic, or the trusted proxy's header), never n8n's token, and the
// same cross-site fence as the pages' forms.

func (h *Handler) registerRetries(r gin.IRouter) {
	api := r.Group("/v1", h.apiPerson, h.needRetrier)
	api.POST("/retries", h.bodyBudget(h.cfg.MaxBody), h.startRetries)
	api.GET("/retries/:id", h.getRetryRun)
	api.POST("/retries/:id/cancel", h.bodyBudget(64<<10), h.cancelRetryRun)
}

// eventAct answers POST /v1/events/{source}/{event_id}/retry or …/lookup.
func (h *Handler) eventAct(c *gin.Context) {
	if isRetry(c) {
		h.needRetrier(c)
		if !c.IsAborted() {
			h.retryEvent(c)
		}
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), cmp.Or(h.cfg.APITimeout, 15*time.Second))
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	h.postEventAPI(c)
}

// retrySuffix ends the path of an event's retry, as lookupSuffix a lookup's.
const retrySuffix = "/retry"

// isRetry reports whether a request to the event's catch-all route asks
// for a retry.
func isRetry(c *gin.Context) bool {
	return strings.HasSuffix(c.Request.URL.EscapedPath(), retrySuffix) &&
		strings.HasSuffix(c.Param("event_id"), retrySuffix)
}

// needRetrier answers 503 where no retrier is configured (a handler built
// without one).
func (h *Handler) needRetrier(c *gin.Context) {
	if h.cfg.Retrier == nil {
		h.apiError(c, http.StatusServiceUnavailable, "unavailable", "retries are not offered by this service", nil)
		return
	}
	c.Next()
}

// apiPerson signs a person in for a /v1 endpoint, answering JSON.
func (h *Handler) apiPerson(c *gin.Context) {
	user, v, wait := h.signIn.user(c.Request)
	switch v {
	case limitedOut:
		c.Header("Retry-After", retryAfter(wait))
		h.apiError(c, http.StatusTooManyRequests, "too_many_sign_ins", "too many failed sign-ins: wait, then try again", nil)
		return
	case busy:
		c.Header("Retry-After", "1")
		h.apiError(c, http.StatusServiceUnavailable, "busy", "too many sign-ins at once: try again in a second", nil)
		return
	case refused:
		if h.cfg.UI.TrustHeader == "" {
			c.Header("WWW-Authenticate", `Basic realm="retryaudit", charset="UTF-8"`)
		}
		h.apiError(c, http.StatusUnauthorized, "unauthorized",
			"sign in as a person (the pages' user and password): retries, lookups and the audit log are people's, not n8n's", nil)
		return
	}
	if c.Request.Method != http.MethodGet && !h.checkCSRF(c) {
		h.apiError(c, http.StatusForbidden, "cross_origin", "a request from another site: nothing was changed", nil)
		return
	}
	c.Set(ctxUser, user)
	c.Next()
}

// retryFail answers a refused or failed retry request.
func (h *Handler) retryFail(c *gin.Context, err error) {
	var rf *retries.Refusal
	if errors.As(err, &rf) {
		code, name := status(rf.Code())
		c.AbortWithStatusJSON(code, apiErrorBody{Error: apiErrorDetail{Code: name, Reason: rf.Reason, Message: rf.Message,
			Status: string(rf.Status)}})
		return
	}
	h.fail(c, err)
}

// decodeStrict decodes a JSON object into v, refusing unknown members: a
// misspelled filter must not select more than was meant.
func (h *Handler) decodeStrict(c *gin.Context, v any) bool {
	raw, ok := h.readBody(c)
	if !ok {
		return false
	}
	if err := checkShape(raw); err != nil {
		h.apiError(c, http.StatusBadRequest, "invalid_json", "the body must be one JSON object: "+jsonProblem(err), nil)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, more := dec.Token(); more != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return true
	case errors.As(err, &typ) && typ.Field != "":
		h.apiError(c, http.StatusUnprocessableEntity, "validation_failed", "a field has the wrong type",
			map[string]string{typ.Field: "must be a JSON " + typ.Type.String()})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		h.apiError(c, http.StatusUnprocessableEntity, "validation_failed", "an unknown field",
			map[string]string{name: "unknown: nothing was done"})
	default:
		h.apiError(c, http.StatusBadRequest, "invalid_json", "the body must be one JSON object: "+jsonProblem(err), nil)
	}
	return false
}

// retryEvent answers POST /v1/events/{source}/{event_id}/retry with
// {"version": n, "item": ""}: Retry in n8n, for a person.
func (h *Handler) retryEvent(c *gin.Context) {
	source := c.Param("source")
	eventID := strings.TrimSuffix(strings.TrimPrefix(c.Param("event_id"), "/"), retrySuffix)
	if source == audit.EncodedKeyMark {
		if s, id, ok := audit.DecodeEventPath(eventID); ok {
			source, eventID = s, id
		}
	}
	var body struct {
		Version *int64 `json:"version"`
		Item    string `json:"item"`
	}
	if !h.decodeStrict(c, &body) {
		return
	}
	if body.Version == nil {
		h.apiError(c, http.StatusUnprocessableEntity, "validation_failed", "the entry's version you saw is required",
			map[string]string{"version": "required: the entry's version you saw (GET /v1/events/{source}/{event_id})"})
		return
	}
	res, err := h.cfg.Retrier.One(c.Request.Context(), audit.EntryKey{Source: source, EventID: eventID, Item: body.Item},
		*body.Version, retries.Who{Name: c.GetString(ctxUser), Via: "api"})
	if err != nil {
		h.retryFail(c, err)
		return
	}
	if res.State == "sending" { // n8n still runs it: its report settles the entry
		c.JSON(http.StatusAccepted, gin.H{"result": res})
		return
	}
	c.JSON(http.StatusOK, gin.H{"result": res})
}

// retriesRequest is POST /v1/retries' body.
type retriesRequest struct {
	Source   string        `json:"source"`
	Workflow string        `json:"workflow"`
	From     string        `json:"from"`
	To       string        `json:"to"`
	Events   []retries.Ref `json:"events"`
	DryRun   bool          `json:"dry_run"`
}

// filter reads the request's filter, naming each bad field.
func (r retriesRequest) filter() (retries.Filter, error) {
	f := retries.Filter{Source: r.Source, Workflow: r.Workflow, Events: r.Events}
	bad := audit.FieldErrors{}
	for name, v := range map[string]string{"from": r.From, "to": r.To} {
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			bad.Add(name, "must be a time such as 2026-12-06T14:00:00Z (RFC 3339)")
			continue
		}
		if name == "from" {
			f.From = &t
		} else {
			f.To = &t
		}
	}
	if err := bad.Err(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// startRetries answers POST /v1/retries: the plan (dry_run), or a run of
// it started (202, its progress at Location).
func (h *Handler) startRetries(c *gin.Context) {
	var req retriesRequest
	if !h.decodeStrict(c, &req) {
		return
	}
	f, err := req.filter()
	if err != nil {
		h.fail(c, err)
		return
	}
	if req.DryRun {
		p, err := h.cfg.Retrier.Plan(c.Request.Context(), f)
		if err != nil {
			h.retryFail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"plan": p})
		return
	}
	run, err := h.cfg.Retrier.Start(c.Request.Context(), f, retries.Who{Name: c.GetString(ctxUser), Via: "api"})
	if err != nil {
		h.retryFail(c, err)
		return
	}
	c.Header("Location", fmt.Sprintf("/v1/retries/%d", run.ID))
	c.JSON(http.StatusAccepted, gin.H{"run": run, "summary": run.Summary()})
}

// runID reads a run's id from the path.
func (h *Handler) runID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		h.apiError(c, http.StatusNotFound, "not_found", "no retry run "+strconv.Quote(c.Param("id")), nil)
		return 0, false
	}
	return id, true
}

// getRetryRun answers GET /v1/retries/{id}: a run's progress.
func (h *Handler) getRetryRun(c *gin.Context) {
	id, ok := h.runID(c)
	if !ok {
		return
	}
	run, err := h.cfg.Retrier.Get(c.Request.Context(), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"run": run, "summary": run.Summary()})
}

// cancelRetryRun answers POST /v1/retries/{id}/cancel.
func (h *Handler) cancelRetryRun(c *gin.Context) {
	id, ok := h.runID(c)
	if !ok {
		return
	}
	var none struct{}
	if c.Request.ContentLength != 0 && !h.decodeStrict(c, &none) { // no body, or {}
		return
	}
	run, err := h.cfg.Retrier.Cancel(c.Request.Context(), id, retries.Who{Name: c.GetString(ctxUser), Via: "api"})
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"run": run, "summary": run.Summary()})
}
