package audit

import (
	"fmt"
	"strings"
)

// Outcome decides an outcome report by the table: the holder (or a Retry
// of it) moves the entry; anyone else is refused as not_holder and the
// report is kept as evidence once per execution and outcome; a report that
// contradicts a person's resolution is kept and alerted. A refusal comes
// back as the error, beside what it wrote (the evidence), which commits.
func (d *Decider) Outcome(r OutcomeRequest, word *N8NWord) (OutcomeResult, error) {
	k := EntryKey{Source: r.Source, EventID: r.EventID, Item: r.Item}
	ev := d.snap.Entries[EntryKey{Source: r.Source, EventID: r.EventID}]
	switch {
	case !exists(ev):
		return OutcomeResult{}, Errorf(CodeNotFound, "no event %s/%s", r.Source, r.EventID)
	case r.Item == "" && ev.ItemCount > 0:
		return OutcomeResult{}, FieldErrors{"item": "required: this event was claimed with items"}.Err()
	case r.Item != "" && ev.ItemCount == 0:
		return OutcomeResult{}, FieldErrors{"item": "this event was claimed without items: leave item out"}.Err()
	}
	e := d.snap.Entries[k]
	if !exists(e) {
		return OutcomeResult{}, Errorf(CodeNotFound, "no item %q in event %s/%s", r.Item, r.Source, r.EventID)
	}
	id := d.identify(Sighting{Kind: SeenOutcome, ID: r.ExecutionID, WorkflowID: r.WorkflowID, Mode: r.Mode,
		Stamp: r.RunStamp, Word: word})
	note := joinNote(id.Reset, id.Note)
	who := whoFor(e, id)
	if id.Refused != "" {
		// Another execution the service cannot tell from the one it knows
		// by the id: it holds nothing.
		id = Identity{ID: r.ExecutionID, Chain: []string{r.ExecutionID}}
		note, who = "its id is known from another workflow", WhoOther
	}
	row := d.decide(e, Act(r.Outcome), who)
	wf := d.workflowOf(id.ID)
	if wf == "" {
		wf = r.WorkflowID
	}
	switch row.Answer {
	case AnsNotFound:
		return OutcomeResult{}, Errorf(CodeNotFound, "no event %s/%s", r.Source, r.EventID)
	case AnsNotHolder:
		before := *e
		d.evidence(e, row, r, id, note)
		d.count(r.Source, wf, MetricRefused)
		msg := fmt.Sprintf("execution %s does not hold %s (holder %s, %s): nothing was changed; the report is kept as evidence",
			id.ID, entryName(k), holderName(before.Holder), before.Status)
		return OutcomeResult{Status: e.Status}, &Error{Code: CodeNotHolder, Status: before.Status, Holder: before.Holder, Message: msg}
	case AnsConflict:
		before := *e
		if row.Line == KindContradiction {
			d.contradiction(e, row, r, id, "", d.event(e).Version)
		}
		return OutcomeResult{Status: e.Status}, &Error{Code: CodeConflict, Status: before.Status, Holder: before.Holder,
			Message: conflictMessage(before, r.Outcome)}
	case AnsUnchanged:
		res := OutcomeResult{Status: e.Status, NeedsReview: e.NeedsReview()}
		if row.Line == KindContradiction {
			res.Message = d.contradiction(e, row, r, id, "", d.event(e).Version)
		}
		return res, nil
	}
	if row.Line == KindContradiction { // the holder's done after a person's failed: back to processing
		by, since := e.ResolvedBy, d.event(e).Version
		d.apply(e, row, id.ID, false, Status(r.Outcome))
		d.setCRM(e, r.CRMRef)
		msg := d.contradiction(e, row, r, id, by, since)
		d.rollUpItem(e)
		return OutcomeResult{Changed: true, Status: e.Status, NeedsReview: true, Message: msg}, nil
	}
	d.apply(e, row, id.ID, false, Status(r.Outcome))
	if r.Outcome == OutcomeDone {
		d.setCRM(e, r.CRMRef)
	}
	d.rollUpItem(e)
	msg := reporterMessage(r, id, note)
	h := d.line(e, HistoryLine{Kind: KindOutcome, ExecutionID: id.ID, RetryOf: chainAt(id.Chain, 1),
		Decision: string(r.Outcome), Message: msg, CRMRef: r.CRMRef})
	d.present(e, id.ID, RoleReport, r.WorkflowID)
	metrics := []string{MetricOutcome + string(r.Outcome)}
	if len(id.Chain) > 1 {
		metrics = append(metrics, MetricRetry)
	}
	d.count(r.Source, wf, metrics...)
	switch {
	case row.Alert != "":
		d.alertEvent(e, row.Alert, h.HistoryLine, "")
	case row.News:
		d.news(e, h.HistoryLine, "")
	}
	return OutcomeResult{Changed: true, Status: e.Status, NeedsReview: e.NeedsReview(), Message: msg}, nil
}

// evidence keeps a refused report in the history, once per execution and
// outcome (a node's Retry On Fail resends it): a done or unknown from
// outside the fence puts a processing entry in review and is alerted (on
// a done entry too: a second order may exist); a stray failed is news in a
// thread already open.
func (d *Decider) evidence(e *Entry, row Row, r OutcomeRequest, id Identity, note string) {
	key := evidenceKey{e.EntryKey, id.ID, KindNotHolder, r.Outcome}
	if _, seen := d.snap.Evidence[key]; seen {
		return
	}
	d.snap.Evidence[key] = d.event(e).Version
	before := *e
	msg := fmt.Sprintf("execution %s reported %s", id.ID, r.Outcome)
	if r.CRMRef != "" {
		msg += " (" + r.CRMRef + ")"
	}
	msg += fmt.Sprintf(" but does not hold the entry (holder %s, %s)", holderName(before.Holder), before.Status)
	if note == "its id is known from another workflow" {
		msg += "; " + note
	}
	if r.Reason != "" {
		msg += ": " + r.Reason
	}
	if before.Status == StatusProcessing {
		d.apply(e, row, id.ID, false, "")
		if e.Item != "" {
			ev := d.event(e)
			d.apply(ev, Row{Review: row.Review}, "", false, "")
		}
	}
	h := d.line(e, HistoryLine{Kind: KindNotHolder, ExecutionID: id.ID, Decision: string(r.Outcome),
		Status: string(before.Status), Message: msg, CRMRef: r.CRMRef})
	switch {
	case row.Alert != "":
		d.alertEvent(e, row.Alert, h.HistoryLine, "")
	case row.News:
		d.news(e, h.HistoryLine, "")
	}
}

// contradiction keeps the holder's report that disagrees with a person's
// resolution (or cancellation), once per execution and outcome, with its
// CRM reference, and alerts; it returns the line's message. movedFrom is
// the person whose failed the report moved back to processing ("" when
// the entry stays).
func (d *Decider) contradiction(e *Entry, row Row, r OutcomeRequest, id Identity, movedFrom string, since int64) string {
	prev, moved := e.Status, movedFrom != ""
	if moved {
		prev = StatusFailed
	}
	msg := fmt.Sprintf("execution %s reported %s", id.ID, r.Outcome)
	if r.CRMRef != "" {
		msg += " (CRM reference " + r.CRMRef + ")"
	}
	by := e.ResolvedBy
	if moved {
		by = movedFrom
	}
	if by == "" {
		by = "a person"
	}
	msg += fmt.Sprintf(" after %s resolved the entry %s", by, prev)
	switch {
	case moved:
		msg += ": the CRM may have the order; the entry waits for a person again, redeliveries are told to wait"
	case prev == StatusCancelled:
		msg += ": it was cancelled; check the CRM"
	default:
		msg += ": the entry stays done; check the CRM"
	}
	if r.Reason != "" {
		msg += ": " + r.Reason
	}
	key := evidenceKey{e.EntryKey, id.ID, KindContradiction, r.Outcome}
	if d.contradicted(e, id, r.Outcome, since) {
		return msg // a resend of the same report: kept once
	}
	d.snap.Evidence[key] = d.event(e).Version
	h := d.line(e, HistoryLine{Kind: KindContradiction, ExecutionID: id.ID, Decision: string(r.Outcome), Message: msg,
		CRMRef: r.CRMRef})
	d.alertEvent(e, row.Alert, h.HistoryLine, "")
	return msg
}

// contradicted reports whether the report was kept as a contradiction
// since the person's resolution it contradicts: a line written at the
// event's version since (the resolution's, or later), not before.
func (d *Decider) contradicted(e *Entry, id Identity, o Outcome, since int64) bool {
	v, ok := d.snap.Evidence[evidenceKey{e.EntryKey, id.ID, KindContradiction, o}]
	return ok && v >= since
}

// setCRM keeps the CRM reference a report or a person gave.
func (d *Decider) setCRM(e *Entry, ref string) {
	if ref != "" && e.CRMRef != ref {
		e.CRMRef, e.Dirty = ref, true
		e.Version++
	}
}

// rollUpItem rolls an item's event up after the item moved.
func (d *Decider) rollUpItem(e *Entry) {
	if e.Item == "" {
		return
	}
	ev := d.event(e)
	d.rollUp(ev, "")
	if e.Review != "" && ev.Status == StatusProcessing && ev.Review == "" {
		ev.Review, ev.ReviewSince = e.Review, d.now
		ev.Version++
	}
}

// present records that an execution touched an event in a role (a report,
// an error) where it had not presented it.
func (d *Decider) present(e *Entry, id, role, workflowID string) {
	k := presenceKey{e.EntryKey.Event(), id}
	if p := d.snap.Presences[k]; p != nil {
		return
	}
	d.snap.Presences[k] = &Presence{Key: k.Event, ExecutionID: id, Role: role, WorkflowID: workflowID, Dirty: true}
}

// conflictMessage explains a transition the status does not allow.
func conflictMessage(e Entry, o Outcome) string {
	return fmt.Sprintf("the entry is %s: %s cannot follow it (done is final; failed is left only by a new claim or a Retry)",
		e.Status, o)
}

// reporterMessage says who moved the entry: the holder, or a Retry of it
// ("done by retry 32 of 30").
func reporterMessage(r OutcomeRequest, id Identity, note string) string {
	msg := string(r.Outcome) + " by "
	if len(id.Chain) > 1 {
		msg += fmt.Sprintf("retry %s of %s", id.ID, strings.Join(id.Chain[1:], " ← "))
	} else {
		msg += id.ID
	}
	if r.CRMRef != "" {
		msg += "; CRM reference " + r.CRMRef
	}
	if r.Reason != "" {
		msg += ": " + r.Reason
	}
	if note != "" {
		msg += " (" + note + ")"
	}
	return msg
}
