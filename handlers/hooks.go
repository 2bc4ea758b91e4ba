package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

// The hook token is not the API token. The API token sits in a credential
// that every workflow editor can use, so a claim or an Error Trigger payload
// is a workflow's word; the hook token lives in n8n's process environment,
// set by whoever runs n8n, so a hook report is n8n's own.

// hookTokens lists the hook token of each instance that has one.
func hookTokens(cfg Config) []instanceToken {
	var out []instanceToken
	add := func(name, token string) {
		if token != "" {
			out = append(out, instanceToken{name: name, hash: sha256.Sum256([]byte(token))})
		}
	}
	add(audit.DefaultInstance, cfg.HookToken)
	for _, in := range cfg.Instances {
		add(in.Name, in.HookToken)
	}
	return out
}

// tokenOf returns the instance whose token, of the list, the request
// carries as a bearer token, or "". Every token is compared, in constant
// time.
func tokenOf(c *gin.Context, tokens []instanceToken) string {
	scheme, cred, ok := strings.Cut(c.GetHeader("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	instance := ""
	for _, in := range tokens {
		if subtle.ConstantTimeCompare(got[:], in.hash[:]) == 1 {
			instance = in.name
		}
	}
	return instance
}

// hookBearer lets a hook call through only with an instance's hook token.
// Wrong tokens count against the address's GuessLimit, as on /v1.
func (h *Handler) hookBearer(c *gin.Context) {
	addr, refused := h.refuseGuesser(c)
	if refused {
		return
	}
	instance := tokenOf(c, h.hookTokens)
	if instance == "" {
		msg := "send the service's hook token (RETRYAUDIT_HOOK_TOKEN, kept in DATA_DIR/hook-token) as Authorization: Bearer <token>"
		if tokenOf(c, h.tokens) != "" {
			msg = "this is the API token, which workflows send; n8n's execution hooks send the hook token " +
				"(RETRYAUDIT_HOOK_TOKEN, kept in DATA_DIR/hook-token) from n8n's environment"
			h.guard.right(addr)
		} else {
			h.guard.wrong(addr, c.FullPath())
			c.Set(logQuiet, true)
		}
		c.Header("WWW-Authenticate", `Bearer realm="retryaudit hooks"`)
		h.apiError(c, http.StatusUnauthorized, "unauthorized", msg, nil)
		return
	}
	h.guard.right(addr)
	c.Set(ctxInstance, instance)
	c.Next()
}

type hookResultJSON struct {
	ExecutionID  string          `json:"execution_id"`
	NewExecution bool            `json:"new_execution"`
	Duplicate    bool            `json:"duplicate"`
	ErrorID      int64           `json:"error_id,omitempty"`
	ErrorURL     string          `json:"error_url,omitempty"`
	LinkedEvent  *audit.EventKey `json:"linked_event"`
	EventURL     string          `json:"event_url,omitempty"`
	Note         string          `json:"note,omitempty"`
}

// n8nExecutions answers POST /v1/n8n/executions: what n8n's execution hooks
// (n8n/retryaudit-hooks.js) say about executions' starts and ends. A call
// is recorded whole or not at all: one bad report refuses it, naming the
// report's field.
func (h *Handler) n8nExecutions(c *gin.Context) {
	o, ok := h.readObject(c)
	if !ok {
		return
	}
	reports := h.hookReports(c, o)
	validate := func() error { return audit.ValidateHookReports(reports) }
	if err := h.invalid(o, validate); err != nil {
		h.fail(c, err)
		return
	}
	release, ok := h.hookSlot(c)
	if !ok {
		return
	}
	res, err := h.store.RecordHookReports(c.Request.Context(), reports)
	release()
	if err != nil {
		h.fail(c, err)
		return
	}
	h.hookCalls.seen(c, h, reports)
	c.Set(logDecision, fmt.Sprintf("hooks:%d", len(reports)))
	out := make([]hookResultJSON, len(res))
	for i, r := range res {
		out[i] = hookResultJSON{ExecutionID: r.ExecutionID, NewExecution: r.NewExecution, Duplicate: r.Duplicate,
			ErrorID: r.ErrorID, LinkedEvent: r.Linked, Note: r.Note}
		if r.ErrorID != 0 {
			out[i].ErrorURL = h.links.Error(r.ErrorID)
		}
		if r.Linked != nil {
			out[i].EventURL = h.links.Event(r.Linked.Source, r.Linked.EventID)
		}
	}
	c.JSON(http.StatusAccepted, gin.H{"results": out})
}

// hookWait is how long a hook call waits for one of the intake's slots
// before it is answered busy: n8n's hooks keep their reports and send them
// again after Retry-After.
const hookWait = time.Second

// hookSlot takes one of the slots of hook intake (Config.HookConcurrency),
// so that a flood of hook calls holds at most that many of the database's
// writes and connections and claims keep theirs; past hookWait, the call is
// answered 503 busy with Retry-After and ok is false.
func (h *Handler) hookSlot(c *gin.Context) (release func(), ok bool) {
	t := time.NewTimer(hookWait)
	defer t.Stop()
	select {
	case h.hookSlots <- struct{}{}:
		return func() { <-h.hookSlots }, true
	case <-t.C:
	case <-c.Request.Context().Done():
	}
	c.Header("Retry-After", "1")
	h.apiError(c, http.StatusServiceUnavailable, "busy", "hook intake is busy (other hook calls hold its "+
		"slots); nothing was recorded, send the reports again", nil)
	return nil, false
}

// hookReports reads the reports of a hook call; every field of the wrong
// type is named by its place ("reports[3].started_at") in o's errors.
func (h *Handler) hookReports(c *gin.Context, o *object) []audit.N8NHookReport {
	raw, ok := o.present("reports")
	if !ok {
		return nil // validation names it
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		o.errs.Add("reports", "must be an array of reports")
		return nil
	}
	if len(elems) > audit.MaxHookReports {
		o.errs.Add("reports", fmt.Sprintf("must hold at most %d reports", audit.MaxHookReports))
		return nil
	}
	out := make([]audit.N8NHookReport, 0, len(elems))
	for i, e := range elems {
		prefix := fmt.Sprintf("reports[%d]", i)
		r := &object{errs: audit.FieldErrors{}}
		if err := json.Unmarshal(e, &r.fields); err != nil || r.fields == nil {
			o.errs.Add(prefix, "must be an object")
			out = append(out, audit.N8NHookReport{})
			continue
		}
		rep := readHookReport(r)
		h.qualify(c, r, map[string]*string{"execution_id": &rep.ExecutionID, "workflow_id": &rep.WorkflowID,
			"retry_of": &rep.RetryOf})
		for field, problem := range r.errs {
			o.errs.Add(prefix+"."+field, problem)
		}
		out = append(out, rep)
	}
	return out
}

func readHookReport(r *object) audit.N8NHookReport {
	rep := audit.N8NHookReport{
		Phase: r.str("phase"), ExecutionID: r.id("execution_id"), WorkflowID: r.id("workflow_id"),
		WorkflowName: r.str("workflow_name"), Mode: r.str("mode"), RetryOf: r.id("retry_of"),
		StartedAt: r.time("started_at"), StoppedAt: r.time("stopped_at"), Status: r.str("status"),
		LastNode: r.str("last_node"),
	}
	if raw, ok := r.present("error"); ok {
		e := &object{errs: audit.FieldErrors{}}
		if err := json.Unmarshal(raw, &e.fields); err != nil || e.fields == nil {
			r.errs.Add("error", "must be an object with message, node and http_code")
			return rep
		}
		rep.ErrorMessage, rep.ErrorNode, rep.HTTPCode = e.str("message"), e.str("node"), e.id("http_code")
		for field, problem := range e.errs {
			r.errs.Add("error."+field, problem)
		}
	}
	return rep
}

// time reads an RFC 3339 time field, kept in UTC.
func (o *object) time(name string) time.Time {
	s := o.str(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		o.errs.Add(name, "must be an RFC 3339 time, such as 2026-01-02T15:04:05.123Z")
		return time.Time{}
	}
	return t.UTC()
}

// hookCallEvery is how often, at most, an instance's last hook call is
// written down: retryaudit check reads it to the nearest few seconds, and
// a busy n8n calls many times a second.
const hookCallEvery = 5 * time.Second

// hookCalls remembers when each instance's last hook call was written down.
type hookCalls struct {
	mu      sync.Mutex
	written map[string]time.Time
}

// seen writes the call down unless it did so for the instance within
// hookCallEvery. The reports are recorded already: a failure here is only
// logged.
func (hc *hookCalls) seen(c *gin.Context, h *Handler, reports []audit.N8NHookReport) {
	instance := c.GetString(ctxInstance)
	now := h.cfg.Now()
	hc.mu.Lock()
	if hc.written == nil {
		hc.written = map[string]time.Time{}
	}
	due := now.Sub(hc.written[instance]) >= hookCallEvery
	if due {
		hc.written[instance] = now
	}
	hc.mu.Unlock()
	if !due {
		return
	}
	last := reports[len(reports)-1]
	_, id := h.links.Instance(last.ExecutionID)
	err := h.store.RecordHookCall(c.Request.Context(), audit.HookCall{Instance: instance, Reports: len(reports),
		ExecutionID: id, Phase: last.Phase, Status: last.Status})
	if err != nil {
		h.log.Warn("could not write down the last hook call", "instance", instance, "err", err)
	}
}

// checkHookTokens refuses a hook token that is also an API token, or the
// hook token of two instances: either would blur whose word a call is.
func checkHookTokens(api, hooks []instanceToken) ([]instanceToken, error) {
	seen := map[[32]byte]string{}
	for _, t := range api {
		seen[t.hash] = "the API token of instance " + t.name
	}
	for _, t := range hooks {
		if other, dup := seen[t.hash]; dup {
			return nil, fmt.Errorf("handlers: the hook token of instance %s is also %s", t.name, other)
		}
		seen[t.hash] = "the hook token of instance " + t.name
	}
	return hooks, nil
}
