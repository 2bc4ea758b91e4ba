package handlers

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

type eventsData struct {
	Filter   audit.EventFilter
	Events   []audit.Event
	Counts   map[string]int
	Total    int
	Statuses []audit.Status
	Next     string // the next page's query string
	Filters  bool   // some filter is set
	// Instances names the n8n instances, when there are several.
	Instances []string
}

// eventsPage is the list of events, newest activity first.
func (h *Handler) eventsPage(c *gin.Context) {
	f, err := h.eventFilter(c)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	ctx := c.Request.Context()
	page, err := h.store.Events(ctx, f)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	counts, err := h.statusCounts(ctx)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	d := eventsData{Filter: f, Events: page.Events, Counts: map[string]int{}, Statuses: audit.Statuses,
		Filters:   f.Source != "" || f.Status != "" || f.Prefix != "" || f.NeedsReview || f.Instance != "",
		Instances: h.instanceNames()}
	for status, n := range counts {
		d.Counts[string(status)] = n
		d.Total += n
	}
	if page.Next != "" {
		q := c.Request.URL.Query()
		q.Set("cursor", page.Next)
		d.Next = "/?" + q.Encode()
	}
	h.render(c, http.StatusOK, "events", view{Title: "Events", Nav: "events", Data: d})
}

type eventData struct {
	audit.EventDetail
	Path       string
	IdemKey    string
	CRMURL     string
	HolderN8N  string
	Items      []itemRow
	Timeline   []timelineEntry
	Executions []executionRow
	Resolvable bool // the event itself (not its items) can be resolved
	// Cancellable: a person may say never to act on it (a failed event;
	// a processing one is cancelled from the resolve form).
	Cancellable bool
	// Retryable: a failed event, which a person may ask n8n to retry.
	Retryable bool
	Form      resolveForm
	// Evidence are outcomes refused from executions that do not hold the
	// entry, newest first, each with a one-click confirmation when it
	// says done.
	Evidence []evidenceRow
	// Older links to the next page of history ("" on the last); Newer
	// says this is not the first.
	Older string
	Newer bool
	// Lookup is the CRM lookup beside the resolve form (nil when the
	// source has none).
	Lookup *lookupView
}

// evidenceRow is a refused report and, when a person may confirm it, the
// form that does.
type evidenceRow struct {
	audit.HistoryLine
	Confirm *formView
}

type itemRow struct {
	audit.Entry
	IdemKey     string
	CRMURL      string
	Resolvable  bool
	NeedsReview bool
	Retryable   bool // a failed item: Retry in n8n
}

type executionRow struct {
	audit.EventExecution
	Chain  string // "6 ← 2": what it retries, up to the root
	N8NURL string
}

// timelineEntry is one line of the event's story: a history line or an
// alert.
type timelineEntry struct {
	At          time.Time
	Kind        string
	Title       string
	ExecutionID string
	Chain       string
	Workflow    string
	Node        string
	Actor       string
	Message     string
	Item        string
	ErrorID     int64
	N8NURL      string
	AlertState  string
	AlertError  string
	Changed     bool  // written after the page a refused form was sent from
	version     int64 // the event's version after the line
}

type resolveForm struct {
	Item, To, Note, CRMRef string
	// Since is the version of the page a refused form was sent from: the
	// lines written after it are marked.
	Since int64
}

// eventPage is the audit row: everything about one event.
func (h *Handler) eventPage(c *gin.Context) {
	h.showEvent(c, http.StatusOK, "", resolveForm{})
}

func (h *Handler) showEvent(c *gin.Context, code int, problem string, form resolveForm) {
	source, eventID := eventKey(c)
	if err := audit.ValidateKey(source, eventID); err != nil {
		h.pageFail(c, err)
		return
	}
	page, err := historyPage(c, "before", "limit")
	if err != nil {
		h.pageFail(c, err)
		return
	}
	d, err := h.store.EventPage(c.Request.Context(), source, eventID, page)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	data := h.eventData(d, page.Before > 0)
	data.Older = pageLink(audit.Links{}.Event(source, eventID), "before", d.HistoryNext)
	data.Newer = page.Before > 0
	data.Form = form
	if err := h.lookupData(c.Request.Context(), &data); err != nil {
		h.pageFail(c, err)
		return
	}
	for i := range data.Timeline {
		data.Timeline[i].Changed = form.Since > 0 && data.Timeline[i].version > form.Since
	}
	notice := ""
	switch c.Query("resolved") {
	case "done":
		notice = "Marked done."
	case "failed":
		notice = "Marked failed: the next delivery or a Retry in n8n will process it again."
	case "cancelled":
		notice = "Cancelled: every later claim is told not to act on it."
	}
	if r := retryNotice(c.Query("retried"), c.Query("retry")); r != "" {
		notice = r
	}
	if c.Query("looked") != "" && data.Lookup != nil && data.Lookup.Result != nil {
		notice = "Looked up in the CRM: " + lookupWords(*data.Lookup.Result) + "."
	}
	h.render(c, code, "event", view{Title: source + " / " + eventID, Nav: "events", Notice: notice,
		Problem: problem, Data: data})
}

// eventData prepares the page; newer says that newer history lines exist
// (a page after the first).
func (h *Handler) eventData(d audit.EventDetail, newer bool) eventData {
	data := eventData{
		EventDetail: d,
		Path:        audit.Links{}.Event(d.Source, d.EventID),
		IdemKey:     audit.IdempotencyKey(d.Source, d.EventID, ""),
		CRMURL:      h.links.CRMOrder(d.Source, d.EventID, "", d.CRMRef),
		Resolvable:  d.Status == audit.StatusProcessing && d.ItemCount == 0,
		Cancellable: d.Status == audit.StatusFailed && d.ItemCount == 0,
		Retryable:   d.Status == audit.StatusFailed && d.ItemCount == 0 && h.cfg.Retrier != nil,
	}
	retryOf := map[string]string{}
	for _, x := range d.Executions {
		retryOf[x.ID] = x.RetryOf
		if x.ID == d.Holder {
			data.HolderN8N = h.links.N8NExecution(x.WorkflowID, x.ID)
		}
	}
	for _, x := range d.Executions {
		data.Executions = append(data.Executions, executionRow{EventExecution: x, Chain: chain(retryOf, x.RetryOf),
			N8NURL: h.links.N8NExecution(x.WorkflowID, x.ID)})
	}
	cutoff := h.cfg.Now().Add(-h.store.ReviewAfter())
	itemHolder := map[string]string{}
	for _, it := range d.Items {
		itemHolder[it.Item] = it.Holder
		data.Items = append(data.Items, itemRow{Entry: it, IdemKey: audit.IdempotencyKey(d.Source, d.EventID, it.Item),
			CRMURL: h.links.CRMOrder(d.Source, d.EventID, it.Item, it.CRMRef), Resolvable: it.Status == audit.StatusProcessing,
			Retryable:   it.Status == audit.StatusFailed && h.cfg.Retrier != nil,
			NeedsReview: it.Status == audit.StatusProcessing && (it.Review != "" || it.Since.Before(cutoff))})
	}
	data.Evidence = h.evidence(d, itemHolder)
	errURL := map[int64]string{}
	for _, e := range d.Errors {
		errURL[e.ID] = h.links.N8NExecution(e.WorkflowID, e.ExecutionID)
	}
	wf := map[string]string{}
	for _, x := range d.Executions {
		wf[x.ID] = x.WorkflowID
	}
	for _, l := range d.History {
		e := timelineEntry{At: l.At, Kind: l.Kind, Title: historyTitle(l), ExecutionID: l.ExecutionID,
			Chain: chain(retryOf, l.RetryOf), Workflow: cmp.Or(l.WorkflowName, l.WorkflowID), Node: l.Node,
			Actor: l.Actor, Message: l.Message, Item: l.Item, version: l.Version}
		if l.ErrorID != nil {
			e.ErrorID, e.N8NURL = *l.ErrorID, errURL[*l.ErrorID]
		} else if l.ExecutionID != "" {
			e.N8NURL = h.links.N8NExecution(wf[l.ExecutionID], l.ExecutionID)
		}
		data.Timeline = append(data.Timeline, e)
	}
	// The alerts beside this page of history: those between its oldest
	// line and the next page's newest (any time on the first page).
	var from, until time.Time
	if len(d.History) > 0 {
		if d.HistoryNext > 0 {
			from = d.History[0].At
		}
		until = d.History[len(d.History)-1].At
	}
	for _, a := range d.Alerts {
		if a.Kind == audit.RowRefresh {
			continue // bookkeeping of the first message, not news
		}
		if a.CreatedAt.Before(from) || (newer && a.CreatedAt.After(until)) {
			continue
		}
		al, _ := a.Alert()
		data.Timeline = append(data.Timeline, timelineEntry{At: a.CreatedAt, Kind: "alert",
			Title: alertTitle(a.Kind, al.Kind), AlertState: a.State, AlertError: a.LastError})
	}
	slices.SortStableFunc(data.Timeline, func(a, b timelineEntry) int { return b.At.Compare(a.At) }) // newest first
	return data
}

// pageLink is path?name=cursor, or "" on the last page.
func pageLink(path, name string, cursor int64) string {
	if cursor <= 0 {
		return ""
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + name + "=" + strconv.FormatInt(cursor, 10)
}

// evidence lists the refused reports of an event, newest first. A done
// report on an entry still processing can be confirmed in one click: the
// form carries what the report said and the holder the page shows.
func (h *Handler) evidence(d audit.EventDetail, itemHolder map[string]string) []evidenceRow {
	var rows []evidenceRow
	for i := len(d.Refused) - 1; i >= 0; i-- {
		l := d.Refused[i]
		if l.Kind != audit.KindNotHolder {
			continue
		}
		row := evidenceRow{HistoryLine: l}
		status, holder, review, version := d.Status, d.Holder, d.NeedsReview, d.Version
		if l.Item != "" {
			status, holder, review = "", itemHolder[l.Item], false
			for _, it := range d.Items {
				if it.Item == l.Item {
					status, review, version = it.Status, it.Review != "", it.Version
				}
			}
		}
		// An entry taken over since the report (no longer in review) may be
		// running its action again: the click then needs the same
		// confirmation as the resolve form.
		if l.Decision == string(audit.OutcomeDone) && status == audit.StatusProcessing {
			row.Confirm = &formView{Path: audit.Links{}.Event(d.Source, d.EventID), Item: l.Item, Holder: holder,
				Confirm: !review, Version: version,
				To: string(audit.StatusDone), CRMRef: l.CRMRef,
				Note: "Confirmed the report of execution " + l.ExecutionID + " (" + l.At.UTC().Format(time.RFC3339) + ")"}
		}
		rows = append(rows, row)
	}
	return rows
}

// chain renders what an execution retries, up to the root: "6 ← 2".
func chain(retryOf map[string]string, parent string) string {
	var parts []string
	for parent != "" && len(parts) < 50 && !slices.Contains(parts, parent) {
		parts = append(parts, parent)
		parent = retryOf[parent]
	}
	return strings.Join(parts, " ← ")
}

// classWords say why a delivery happened, as the event page tells it.
var classWords = map[audit.Class]string{
	audit.ClassDoubleStart:       "n8n started a second execution for the same call",
	audit.ClassSenderRetry:       "the sender delivered the event again",
	audit.ClassParallelWorkflows: "another workflow received the same event",
	audit.ClassManualRetry:       "a Retry in n8n",
	audit.ClassAfterFailure:      "a delivery after the event had failed: it was processed again",
}

func historyTitle(l audit.HistoryLine) string {
	switch l.Kind {
	case audit.KindClaim:
		title := "Claim: " + strings.ReplaceAll(l.Decision, "_", " ") + " (" + strings.ReplaceAll(l.Delivery, "_", " ") + ")"
		if why := classWords[audit.Class(l.Class)]; why != "" {
			title += " — " + why
		}
		return title
	case audit.KindOutcome:
		return "Outcome: " + l.Decision
	case audit.KindError:
		return "Error (" + strings.ReplaceAll(l.Decision, "_", " ") + ")"
	case audit.KindResolution:
		return "Resolved " + l.Decision + " by " + l.Actor
	case audit.KindFingerprint:
		return "Fingerprint mismatch"
	case audit.KindStale:
		return "Processing too long"
	case audit.KindRetry:
		return "Retry in n8n asked by " + l.Actor
	case audit.KindNotHolder:
		return "Refused: " + l.Decision + " from an execution that does not hold the entry"
	case audit.KindContradiction:
		return "Contradiction: the holder reported " + l.Decision + " after a person's resolution"
	case audit.KindLookup:
		return "CRM lookup by " + l.Actor + " (" + cmp.Or(l.Delivery, audit.ViaPage) + "): " +
			strings.ReplaceAll(l.Decision, "_", " ") + refWords(l.CRMRef)
	}
	return l.Kind
}

func alertTitle(row, kind string) string {
	if row == audit.RowFollowup {
		return "Slack: follow-up in the thread"
	}
	return "Slack alert: " + strings.ReplaceAll(kind, "_", " ")
}

// resolve takes a person's decision from the event page's form.
func (h *Handler) resolve(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10)
	source, eventID := eventKey(c)
	form := resolveForm{Item: c.PostForm("item"), To: c.PostForm("to"), Note: c.PostForm("note"),
		CRMRef: strings.TrimSpace(c.PostForm("crm_ref"))}
	version, err := strconv.ParseInt(cmp.Or(c.PostForm("version"), "0"), 10, 64)
	if err != nil || version < 0 {
		h.pageError(c, http.StatusUnprocessableEntity, "Form refused",
			"The form's version is not a number: reload the event's page and try again. Nothing was changed.")
		return
	}
	if !h.checkCSRF(c) {
		h.pageError(c, http.StatusForbidden, "Form refused",
			"The form did not carry this site's token (or came from another site). Nothing was changed: reload the event's page and try again.")
		return
	}
	if form.To == "retry" {
		h.retryFromPage(c, source, eventID, version)
		return
	}
	_, err = h.store.Resolve(c.Request.Context(), audit.ResolveRequest{Source: source, EventID: eventID,
		Item: form.Item, To: audit.Status(form.To), Actor: c.GetString(ctxUser), Note: strings.TrimSpace(form.Note),
		CRMRef: form.CRMRef, Holder: c.PostForm("holder"), Confirmed: c.PostForm("confirm") == "yes", Version: version})
	if err != nil {
		var e *audit.Error
		switch audit.ErrorCode(err) {
		case audit.CodeInvalid:
			h.showEvent(c, http.StatusUnprocessableEntity, fieldProblems(err), form)
		case audit.CodeConflict:
			since := resolveForm{}
			if errors.As(err, &e) && e.Stale {
				since.Since = version // mark what changed since the person's page
			}
			h.showEvent(c, http.StatusConflict, strings.TrimPrefix(err.Error(), "audit: "), since)
		default:
			h.pageFail(c, err)
		}
		return
	}
	q := url.Values{"resolved": {form.To}}
	c.Redirect(http.StatusSeeOther, audit.Links{}.Event(source, eventID)+"?"+q.Encode())
}

// fieldProblems says what is wrong with a form, in words.
func fieldProblems(err error) string {
	e, ok := err.(*audit.Error)
	if !ok || len(e.Fields) == 0 {
		return strings.TrimPrefix(err.Error(), "audit: ")
	}
	names := map[string]string{"to": "Decision", "note": "Note", "item": "Item", "actor": "Your name",
		"crm_ref": "CRM reference", "confirm": "Confirmation", "holder": "Holder"}
	var parts []string
	for f, p := range e.Fields {
		parts = append(parts, cmp.Or(names[f], f)+": "+p)
	}
	slices.Sort(parts)
	return "Nothing was changed. " + strings.Join(parts, "; ") + "."
}
