package audit

import (
	"cmp"
	"fmt"
	"time"
)

// Hook decides one report of n8n's execution hooks: the execution as n8n
// knows it (its start time tells a reused id apart, whenever the report
// arrives), and for a failed end an error, linked and alerted like an Error
// Trigger payload (whose payload, when it comes, fills in the same record).
func (d *Decider) Hook(r N8NHookReport) N8NHookResult {
	kind, status := SeenHookStart, ""
	if r.Phase == PhaseEnd {
		kind, status = SeenHookEnd, r.Status
	}
	id := d.identify(Sighting{Kind: kind, ID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
		Mode: r.Mode, RetryOf: r.RetryOf, StartedAt: r.StartedAt, Status: status})
	res := N8NHookResult{ExecutionID: cmp.Or(id.ID, r.ExecutionID), NewExecution: id.Reset != "", Note: cmp.Or(id.Reset, id.Refused)}
	if !r.Failed() {
		return res
	}
	msg := r.ErrorMessage
	if msg == "" {
		msg = fmt.Sprintf("n8n ended the execution with status %s and gave no message", r.Status)
	}
	e := d.recordError(N8NErrorReport{Kind: N8NErrorHook, DedupeKey: "exec:" + r.ExecutionID, ExecutionID: r.ExecutionID,
		RetryOf: r.RetryOf, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Mode: r.Mode,
		Node: cmp.Or(r.ErrorNode, r.LastNode), Message: msg, HTTPCode: r.HTTPCode}, id)
	res.ErrorID, res.Duplicate, res.Linked, res.ErrorKey = e.ID, e.Duplicate, e.Linked, e.DedupeKey
	return res
}

// Resolve decides a person's resolution (done or failed) or cancellation
// of an entry, fenced by what the person saw: the entry's version (and the
// holder) the page showed. A form older than the entry's last change is
// refused, naming the version it has now; the same resolution submitted
// twice is answered as the first. An entry that does not wait for review
// and is younger than the review delay may still be running: it needs the
// confirmation that nothing runs the action.
func (d *Decider) Resolve(r ResolveRequest) (Status, error) {
	k := EntryKey{Source: r.Source, EventID: r.EventID, Item: r.Item}
	ev := d.snap.Entries[EntryKey{Source: r.Source, EventID: r.EventID}]
	e := d.snap.Entries[k]
	switch {
	case !exists(ev):
		return "", Errorf(CodeNotFound, "no event %s/%s", r.Source, r.EventID)
	case r.Item == "" && ev.ItemCount > 0:
		return "", FieldErrors{"item": "required: this event was claimed with items"}.Err()
	case !exists(e):
		return "", Errorf(CodeNotFound, "no item %q in event %s/%s", r.Item, r.Source, r.EventID)
	case r.Version != 0 && e.Version == r.Version+1 && e.ResolvedBy == r.Actor && e.Status == r.To:
		return e.Status, nil // the same form again: the same resolution
	case r.Version != 0 && e.Version != r.Version:
		return "", &Error{Code: CodeConflict, Status: e.Status, Holder: e.Holder, Stale: true, Message: fmt.Sprintf(
			"the entry changed since the page was loaded (version %d, now %d: %s, holder %s): look at what changed, then decide again",
			r.Version, e.Version, e.Status, holderName(e.Holder))}
	}
	act := Act("resolve:" + string(r.To))
	if r.To == StatusCancelled {
		act = ActCancel
	}
	row := d.decide(e, act, WhoPerson)
	switch {
	case row.Answer == AnsConflict:
		return "", &Error{Code: CodeConflict, Status: e.Status, Holder: e.Holder, Message: d.settledBy(e)}
	case row.Answer == AnsUnchanged:
		return e.Status, nil
	case r.Version == 0 && r.Holder != e.Holder:
		return "", &Error{Code: CodeConflict, Status: e.Status, Holder: e.Holder, Message: fmt.Sprintf(
			"execution %s holds the entry now (you saw %s): reload the page and look again", holderName(e.Holder),
			holderName(r.Holder))}
	case e.Status == StatusProcessing && e.Review == "" && d.now.Sub(e.Since) < d.rules.ReviewAfter && !r.Confirmed:
		return "", FieldErrors{"confirm": "the entry does not wait for review and may still be running: " +
			"confirm that no execution is still running the action"}.Err()
	}
	waited := e.Review == ReviewUnknown || e.Review == ReviewError
	since := e.ReviewSince
	holder := e.Holder
	d.apply(e, row, r.Actor, true, "")
	if r.CRMRef != "" && e.CRMRef != r.CRMRef {
		e.CRMRef = r.CRMRef
	}
	d.rollUpItem(e)
	h := d.line(e, HistoryLine{Kind: KindResolution, ExecutionID: holder, Decision: string(r.To), Actor: r.Actor,
		Message: r.Note, CRMRef: r.CRMRef, Delivery: cmp.Or(r.Via, ViaPage)})
	if waited && !since.IsZero() {
		d.plan.Waits = append(d.plan.Waits, ReviewWait{Source: r.Source, Seconds: d.now.Sub(since).Seconds()})
	}
	d.count(r.Source, d.workflowOf(holder), MetricResolved)
	d.news(e, h.HistoryLine, "")
	return e.Status, nil
}

// settledBy says who settled an entry a person tried to resolve.
func (d *Decider) settledBy(e *Entry) string {
	if e.ResolvedBy != "" {
		return fmt.Sprintf("already %s: resolved by %s at %s", e.Status, e.ResolvedBy, e.Since.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("already %s: reported by execution %s at %s", e.Status, holderName(e.Holder),
		e.Since.UTC().Format(time.RFC3339))
}

// Stale decides the stale detector's look at an entry it found processing
// longer than the review delay, held by holder: when it still is, not in
// review and not alerted about since it was taken, people are told once.
func (d *Decider) Stale(k EventKey, holder string, cutoff time.Time) bool {
	e := d.snap.Entries[EntryKey{Source: k.Source, EventID: k.EventID}]
	if !exists(e) || e.Status != StatusProcessing || e.Holder != holder || e.Review != "" || !e.Since.Before(cutoff) ||
		!e.StaleAlertedAt.IsZero() && !e.StaleAlertedAt.Before(e.Since) {
		return false
	}
	row := d.decide(e, ActStale, WhoDetector)
	e.StaleAlertedAt, e.Dirty = d.now, true
	h := d.line(e, HistoryLine{Kind: KindStale, ExecutionID: e.Holder,
		Message: fmt.Sprintf("processing for over %s without an outcome", d.rules.ReviewAfter)})
	d.alertEvent(e, row.Alert, h.HistoryLine, "")
	return true
}

// Retry decides a person's request that n8n retry an entry's failed
// execution, before n8n is asked: only a failed entry, and only as the
// person saw it (its version). The request is written as a line of the
// entry's history and moves its version, so that a form shown before it
// (another retry, a resolution) is stale; the Retry's own report then
// settles the entry by the table's rows for a Retry of the holder.
func (d *Decider) Retry(r RetryRequest) error {
	k := EntryKey{Source: r.Source, EventID: r.EventID, Item: r.Item}
	ev, e := d.snap.Entries[EntryKey{Source: r.Source, EventID: r.EventID}], d.snap.Entries[k]
	switch {
	case !exists(ev):
		return Errorf(CodeNotFound, "no event %s/%s", r.Source, r.EventID)
	case r.Item == "" && ev.ItemCount > 0:
		return FieldErrors{"item": "required: this event was claimed with items"}.Err()
	case !exists(e):
		return Errorf(CodeNotFound, "no item %q in event %s/%s", r.Item, r.Source, r.EventID)
	case e.Version != r.Version:
		return &Error{Code: CodeConflict, Status: e.Status, Holder: e.Holder, Stale: true, Message: fmt.Sprintf(
			"the entry changed since you saw it (version %d, now %d: %s, holder %s): nothing was sent to n8n; look at what changed",
			r.Version, e.Version, e.Status, holderName(e.Holder))}
	}
	row := d.decide(e, ActRetry, WhoPerson)
	if row.Answer == AnsConflict {
		return &Error{Code: CodeConflict, Status: e.Status, Holder: e.Holder, Message: fmt.Sprintf(
			"the entry is %s: only a failed entry is retried; nothing was sent to n8n", e.Status)}
	}
	d.apply(e, row, r.Actor, true, "")
	e.Version++ // nothing else moved: the request itself fences what was shown before it
	if ev != e {
		ev.Version, ev.Dirty = ev.Version+1, true
	}
	msg := fmt.Sprintf("asked n8n to retry execution %s (via %s)", r.ExecutionID, r.Via)
	if r.Run > 0 {
		msg = fmt.Sprintf("asked n8n to retry execution %s (bulk run %d, via %s)", r.ExecutionID, r.Run, r.Via)
	}
	h := d.line(e, HistoryLine{Kind: KindRetry, ExecutionID: r.ExecutionID, Delivery: r.Via,
		Actor: r.Actor, Message: msg})
	d.news(e, h.HistoryLine, "")
	return nil
}
