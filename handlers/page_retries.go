package handlers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/retries"
)

// The retry pages: "Retry in n8n" on a failed event's page, and /retries,
// where a bulk retry is previewed (the dry-run plan) before anything is
// sent, then started, followed and cancelled.

func (h *Handler) registerRetryPages(p gin.IRouter) {
	g := p.Group("/retries", h.pageRetrier)
	g.GET("", h.retriesPage)
	g.POST("", h.bodyBudget(1<<20), h.startRetriesPage)
	g.GET("/:id", h.retryRunPage)
	g.POST("/:id/cancel", h.bodyBudget(4<<10), h.cancelRetryRunPage)
}

// pageRetrier answers 404 where no retrier is configured.
func (h *Handler) pageRetrier(c *gin.Context) {
	if h.cfg.Retrier == nil {
		h.pageError(c, http.StatusNotFound, "Not found", "Retries are not offered here.")
		c.Abort()
		return
	}
	c.Next()
}

// retryFromPage takes the event page's "Retry in n8n" form (to=retry),
// fenced like the resolve form by the version the page showed.
func (h *Handler) retryFromPage(c *gin.Context, source, eventID string, version int64) {
	if h.cfg.Retrier == nil {
		h.pageError(c, http.StatusNotFound, "Not found", "Retries are not offered here.")
		return
	}
	res, err := h.cfg.Retrier.One(c.Request.Context(), audit.EntryKey{Source: source, EventID: eventID,
		Item: c.PostForm("item")}, version, retries.Who{Name: c.GetString(ctxUser), Via: "page"})
	var rf *retries.Refusal
	switch {
	case errors.As(err, &rf):
		code, _ := status(rf.Code())
		since := resolveForm{}
		if rf.Reason == retries.ReasonChanged {
			since.Since = version
		}
		h.showEvent(c, code, "Nothing was sent to n8n: "+rf.Message, since)
		return
	case audit.ErrorCode(err) == audit.CodeInvalid:
		h.showEvent(c, http.StatusUnprocessableEntity, fieldProblems(err), resolveForm{})
		return
	case err != nil:
		h.pageFail(c, err)
		return
	}
	q := url.Values{"retried": {res.State}, "retry": {res.NewExecutionID}}
	c.Redirect(http.StatusSeeOther, audit.Links{}.Event(source, eventID)+"?"+q.Encode())
}

// retryNotice says on the event page what came of a retry.
func retryNotice(state, id string) string {
	switch state {
	case "succeeded":
		return "n8n's retry " + id + " finished successfully: its report settles the entry."
	case "failed":
		return "n8n's retry " + id + " failed again: look at its error below."
	case "no_answer":
		return "The retry was sent; n8n did not answer in time. Its report will settle the entry."
	case "sending":
		return "The retry was sent to n8n, waiting for its report: n8n is still running it. Its report will settle the entry."
	case "refused":
		return "n8n refused the retry: see the history below."
	}
	return ""
}

// retriesData is the /retries page.
type retriesData struct {
	Form     retriesForm
	Plan     *retries.Plan
	PlanJSON string // the entries to retry, as the preview showed them
	Runs     []retries.Run
	Rate     int
	InFlight int
}

// retriesForm is the filter as the person typed it.
type retriesForm struct {
	Source, Workflow, From, To, Events string
}

// filter reads the form into a filter. Times are UTC, as the pages show
// them ("2026-12-06T14:00" from a datetime-local field, or RFC 3339).
func (f retriesForm) filter() (retries.Filter, error) {
	out := retries.Filter{Source: strings.TrimSpace(f.Source), Workflow: strings.TrimSpace(f.Workflow)}
	bad := audit.FieldErrors{}
	for name, v := range map[string]string{"from": f.From, "to": f.To} {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t, err = time.Parse("2006-01-02T15:04", v)
		}
		if err != nil {
			bad.Add(name, "a time such as 2026-12-06T14:00 (UTC)")
			continue
		}
		if name == "from" {
			out.From = &t
		} else {
			out.To = &t
		}
	}
	for _, line := range strings.Split(f.Events, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		source, id, ok := strings.Cut(line, "/")
		if !ok {
			bad.Add("events", fmt.Sprintf("%q is not source/event_id", audit.Truncate(line, 60)))
			continue
		}
		out.Events = append(out.Events, retries.Ref{Source: source, EventID: id})
	}
	if err := bad.Err(); err != nil {
		return out, err
	}
	return out, out.Validate()
}

func (f retriesForm) empty() bool { return f == retriesForm{} }

// retriesPage shows the form, the preview of a filter (nothing is sent)
// and the latest runs.
func (h *Handler) retriesPage(c *gin.Context) {
	form := retriesForm{Source: c.Query("source"), Workflow: c.Query("workflow"), From: c.Query("from"),
		To: c.Query("to"), Events: c.Query("events")}
	d := retriesData{Form: form, Rate: h.cfg.Retrier.Rate(), InFlight: h.cfg.Retrier.InFlight()}
	problem, code := "", http.StatusOK
	if !form.empty() {
		f, err := form.filter()
		if err == nil {
			var p retries.Plan
			p, err = h.cfg.Retrier.Plan(c.Request.Context(), f)
			d.Plan = &p
			d.PlanJSON = planJSON(p)
		}
		var rf *retries.Refusal
		switch {
		case audit.ErrorCode(err) == audit.CodeInvalid:
			problem, code, d.Plan = fieldProblems(err), http.StatusUnprocessableEntity, nil
		case errors.As(err, &rf):
			code, _ = status(rf.Code())
			problem, d.Plan = rf.Message, nil
		case err != nil:
			h.pageFail(c, err)
			return
		}
	}
	runs, err := h.cfg.Retrier.List(c.Request.Context(), 20)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	d.Runs = runs
	h.render(c, code, "retries", view{Title: "Retries", Nav: "retries", Problem: problem, Data: d})
}

// planJSON is the entries a preview would retry, with the versions it saw:
// the run started from the page retries exactly these, fenced by them.
func planJSON(p retries.Plan) string {
	var refs []retries.Ref
	for _, e := range p.Entries {
		if e.Retry {
			refs = append(refs, e.Ref)
		}
	}
	b, _ := json.Marshal(refs)
	return string(b)
}

// startRetriesPage starts a run of the previewed entries.
func (h *Handler) startRetriesPage(c *gin.Context) {
	if !h.checkCSRF(c) {
		h.pageError(c, http.StatusForbidden, "Form refused",
			"The form did not carry this site's token (or came from another site). Nothing was sent: reload the page.")
		return
	}
	var refs []retries.Ref
	if err := json.Unmarshal([]byte(c.PostForm("plan")), &refs); err != nil || len(refs) == 0 {
		h.pageError(c, http.StatusUnprocessableEntity, "Form refused",
			"The form carried no preview to run. Nothing was sent: preview the retry again.")
		return
	}
	run, err := h.cfg.Retrier.Start(c.Request.Context(), retries.Filter{Events: refs},
		retries.Who{Name: c.GetString(ctxUser), Via: "page"})
	var rf *retries.Refusal
	switch {
	case errors.As(err, &rf):
		h.pageError(c, http.StatusConflict, "Nothing to retry", "Nothing was sent: "+rf.Message+
			". Everything the preview showed has changed since: preview again.")
		return
	case audit.ErrorCode(err) == audit.CodeInvalid:
		h.pageError(c, http.StatusUnprocessableEntity, "Form refused", fieldProblems(err))
		return
	case err != nil:
		h.pageFail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/retries/%d", run.ID))
}

// retryRunPage shows a run's progress; it reloads itself while the run
// goes on.
func (h *Handler) retryRunPage(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		h.pageError(c, http.StatusNotFound, "Not found", "There is no such retry run.")
		return
	}
	run, err := h.cfg.Retrier.Get(c.Request.Context(), id)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	notice := ""
	if c.Query("cancelled") != "" {
		notice = "Cancelled: what was being sent finishes, nothing more is sent."
	}
	v := view{Title: fmt.Sprintf("Retry run %d", id), Nav: "retries", Notice: notice, Data: run}
	if !run.Done() {
		v.Refresh = 3
	}
	h.render(c, http.StatusOK, "retryrun", v)
}

// cancelRetryRunPage cancels a run from its page.
func (h *Handler) cancelRetryRunPage(c *gin.Context) {
	if !h.checkCSRF(c) {
		h.pageError(c, http.StatusForbidden, "Form refused",
			"The form did not carry this site's token (or came from another site). Nothing was changed: reload the page.")
		return
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		h.pageError(c, http.StatusNotFound, "Not found", "There is no such retry run.")
		return
	}
	_, err = h.cfg.Retrier.Cancel(c.Request.Context(), id, retries.Who{Name: c.GetString(ctxUser), Via: "page"})
	if audit.ErrorCode(err) == audit.CodeConflict {
		h.pageError(c, http.StatusConflict, "Not cancelled", cmp.Or(strings.TrimPrefix(err.Error(), "audit: "), "")+".")
		return
	}
	if err != nil {
		h.pageFail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/retries/%d?cancelled=1", id))
}
