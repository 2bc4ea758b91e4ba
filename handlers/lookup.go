package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/people"
)

// lookupSuffix ends the path of an event's lookup: POST
// /v1/events/{source}/{event_id}/lookup and /events/{source}/{event_id}/lookup.
// An event id's own '/' is escaped (%2F) in every link the service makes,
// so a literal "/lookup" at the end of the escaped path is this suffix,
// never part of the id.
const lookupSuffix = "/lookup"

// isLookup reports whether a request to the event's catch-all route asks
// for its lookup.
func isLookup(c *gin.Context) bool {
	return strings.HasSuffix(c.Request.URL.EscapedPath(), lookupSuffix) &&
		strings.HasSuffix(c.Param("event_id"), lookupSuffix)
}

// lookupKey reads the event of a lookup's path.
func lookupKey(c *gin.Context) (string, string) {
	source := c.Param("source")
	eventID := strings.TrimSuffix(strings.TrimPrefix(c.Param("event_id"), "/"), lookupSuffix)
	if source == audit.EncodedKeyMark {
		if s, id, ok := audit.DecodeEventPath(eventID); ok {
			return s, id
		}
	}
	return source, eventID
}

// postEventAPI answers POST /v1/events/{source}/{event_id}/lookup: the
// CRM lookup of an event for the person signed in (apiPerson), as the
// retry beside it. A body's actor, if given, must be that
// person: the history never records a name the request only claims.
func (h *Handler) postEventAPI(c *gin.Context) {
	if !isLookup(c) {
		h.notFound(c)
		return
	}
	source, eventID := lookupKey(c)
	o, ok := h.readObject(c)
	if !ok {
		return
	}
	actor, item := o.str("actor"), o.id("item")
	if err := h.invalid(o, func() error { return nil }); err != nil {
		h.fail(c, err)
		return
	}
	if err := audit.ValidateKey(source, eventID); err != nil {
		h.fail(c, err)
		return
	}
	user := c.GetString(ctxUser)
	if actor != "" && actor != user {
		h.fail(c, audit.FieldErrors{"actor": "the person signed in (" + user + ") is recorded, not another name: " +
			"leave actor out"}.Err())
		return
	}
	res, err := h.cfg.Lookups.RunItem(c.Request.Context(), audit.EventKey{Source: source, EventID: eventID}, item,
		people.Who{Name: user, Via: audit.ViaAPI})
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// eventPost takes the event page's forms: the lookup button, or the
// resolve form.
func (h *Handler) eventPost(c *gin.Context) {
	if isLookup(c) {
		h.lookupPage(c)
		return
	}
	h.resolve(c)
}

// lookupPage runs the "Look up in CRM" button (the event page's, the
// review queue's) and shows the event with the answer beside its resolve
// form.
func (h *Handler) lookupPage(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10)
	source, eventID := lookupKey(c)
	item := c.PostForm("item")
	if !h.checkCSRF(c) {
		h.pageError(c, http.StatusForbidden, "Form refused",
			"The form did not carry this site's token (or came from another site). Nothing was looked up: reload the page and try again.")
		return
	}
	if err := audit.ValidateKey(source, eventID); err != nil {
		h.pageFail(c, err)
		return
	}
	_, err := h.cfg.Lookups.RunItem(c.Request.Context(), audit.EventKey{Source: source, EventID: eventID}, item,
		people.Who{Name: c.GetString(ctxUser), Via: audit.ViaPage})
	if err != nil {
		h.pageFail(c, err)
		return
	}
	if c.PostForm("back") == "review" { // the only place a lookup goes back to: no open redirect
		c.Redirect(http.StatusSeeOther, "/review?looked=1#"+cardID(source, eventID))
		return
	}
	c.Redirect(http.StatusSeeOther, audit.Links{}.Event(source, eventID)+"?looked=1#lookup")
}

// lookupFresh is how long a lookup's answer is offered as a one-click
// resolution: a CRM's "not found" of an hour ago may be an order that
// arrived since, and a retry on it a second order.
const lookupFresh = 15 * time.Minute

// lookupView is the event page's CRM lookup: the button, the newest
// answer, and the one-click resolutions it offers.
type lookupView struct {
	Path   string // the button's form action
	Result *people.Result
	// Changed says the entry moved since the lookup, Old that the lookup
	// is older than lookupFresh: its answer is shown, not offered as a
	// resolution.
	Changed, Old bool
	Resolve      *formView // "Found CRM-123 → done", "Not found → failed"
}

// lookupData prepares the lookup beside an event's resolve form, and
// prefills the form from the newest answer.
func (h *Handler) lookupData(ctx context.Context, data *eventData) error {
	v, err := h.lookupFor(ctx, data.Event, data.Resolvable)
	if err != nil || v == nil {
		return err
	}
	data.Lookup = v
	if f := v.Resolve; f != nil && data.Form == (resolveForm{}) {
		data.Form = resolveForm{To: f.To, Note: f.Note, CRMRef: f.CRMRef}
	}
	return nil
}

// lookupFor is an event's lookup as the pages show it: nil when its
// source has none. resolvable says a person may resolve the event (not
// its items) now: then the newest answer, if the entry has not moved
// since, is offered as a one-click resolution fenced by the version shown.
func (h *Handler) lookupFor(ctx context.Context, ev audit.Event, resolvable bool) (*lookupView, error) {
	if !h.cfg.Lookups.Configured(ev.Source) {
		return nil, nil
	}
	path := audit.Links{}.Event(ev.Source, ev.EventID)
	v := &lookupView{Path: path + lookupSuffix}
	res, ok, err := h.cfg.Lookups.Latest(ctx, audit.EventKey{Source: ev.Source, EventID: ev.EventID}, "")
	if err != nil || !ok {
		return v, err
	}
	v.Result = &res
	v.Changed = res.Version != ev.Version || res.At.Before(ev.Since)
	v.Old = !v.Changed && h.cfg.Now().Sub(res.At) > lookupFresh
	if !resolvable || v.Changed || v.Old || res.Outcome == audit.LookupError {
		return v, nil
	}
	when := res.At.UTC().Format(time.RFC3339)
	f := &formView{Path: path, Holder: ev.Holder, Version: ev.Version, Confirm: !ev.NeedsReview}
	if res.Found() {
		f.To, f.CRMRef = string(audit.StatusDone), res.CRMRef
		f.Note = "Found" + refWords(res.CRMRef) + " in the CRM (lookup by " + res.Actor + " at " + when + ")"
		f.Button = "Found" + refWords(res.CRMRef) + " → mark done"
	} else {
		f.To = string(audit.StatusFailed)
		f.Note = "Not found in the CRM (lookup by " + res.Actor + " at " + when + "): a retry is safe"
		f.Button = "Not found → mark failed"
	}
	v.Resolve = f
	return v, nil
}

func refWords(ref string) string {
	if ref == "" {
		return ""
	}
	return " " + ref
}

// lookupWords says a lookup's answer in a few words.
func lookupWords(r people.Result) string {
	switch r.Outcome {
	case audit.LookupFound:
		return "found" + refWords(r.CRMRef)
	case audit.LookupNotFound:
		return "not found"
	}
	return "the CRM could not answer: " + r.Message
}

// cardID is the anchor of an event's card in the review queue.
func cardID(source, eventID string) string {
	return "card-" + audit.IdempotencyKey(source, eventID, "")
}
