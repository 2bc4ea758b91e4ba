package audit

import (
	"fmt"
	"strings"
	"time"
)

// Claim decides a claim: who its execution is, then each entry it names
// (the event, or each of its items) by the table, then what the claim
// leaves beside them: the execution's presence, the delivery's count and
// class, the history line, the counters, and the follow-ups (a second
// fingerprint, errors that waited for the claim, news for the people
// watching the event). A claim refused for what it asks writes nothing.
func (d *Decider) Claim(r ClaimRequest, word *N8NWord) (ClaimResult, error) {
	evKey := EntryKey{Source: r.Source, EventID: r.EventID}
	ev := d.snap.Entries[evKey]
	if exists(ev) && (ev.ItemCount > 0) != (len(r.Items) > 0) {
		if ev.ItemCount > 0 {
			return ClaimResult{}, &Error{Code: CodeConflict, Message: fmt.Sprintf(
				"event %s/%s was claimed with items: claim it with its items", r.Source, r.EventID)}
		}
		return ClaimResult{}, Errorf(CodeConflict, "event %s/%s was claimed without items: claim it without items",
			r.Source, r.EventID)
	}
	id := d.identify(Sighting{Kind: SeenClaim, ID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
		Mode: r.Mode, Stamp: r.RunStamp, ClaimedRetryOf: r.RetryOf, Word: word})
	if id.Refused != "" {
		return ClaimResult{}, &Error{Code: CodeConflict, Message: id.Refused}
	}
	first := !exists(ev)
	ev = d.entry(evKey)
	res := ClaimResult{IdempotencyKey: IdempotencyKey(r.Source, r.EventID, "")}
	var rows []Row
	unproven := false
	if len(r.Items) == 0 {
		unproven = whoFor(ev, id) == WhoUnproven
		row := d.claimEntry(ev, id)
		rows, res.Decision = append(rows, row), Decision(row.Answer)
	} else {
		res.Decision = DecisionDuplicate
		for _, item := range r.Items {
			e := d.entry(EntryKey{Source: r.Source, EventID: r.EventID, Item: item})
			unproven = unproven || whoFor(e, id) == WhoUnproven
			row := d.claimEntry(e, id)
			rows = append(rows, row)
			dec := Decision(row.Answer)
			res.Items = append(res.Items, ItemClaim{Item: item, Process: dec.Process(), Decision: dec, Status: e.Status,
				HolderExecutionID: e.Holder, IdempotencyKey: IdempotencyKey(r.Source, r.EventID, item)})
			if dec.Rank() > res.Decision.Rank() {
				res.Decision = dec
			}
		}
		holder := ""
		if res.Decision.Process() {
			holder = id.ID
		}
		d.rollUp(ev, holder)
	}
	res.Process, res.Status, res.HolderExecutionID = res.Decision.Process(), ev.Status, ev.Holder
	d.deliver(ev, r, id, first, &res)
	res.LineageNote = id.Reset
	if res.Decision == DecisionHeld || res.Decision == DecisionInProgress {
		res.LineageNote = joinNote(res.LineageNote, id.Note)
	}
	if unproven {
		res.LineageNote = joinNote(res.LineageNote, fmt.Sprintf("execution %s holds it, and nothing shows that this "+
			"claim comes from that very execution (no run_stamp; n8n's API not configured or silent): nothing "+
			"granted; send the workflow's run stamp", id.ID))
	}
	h := d.line(ev, HistoryLine{Kind: KindClaim, ExecutionID: id.ID, RetryOf: chainAt(id.Chain, 1),
		WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node, Decision: string(res.Decision),
		Delivery: string(res.Delivery), Class: string(res.Class), Message: claimMessage(res, id.Chain, res.LineageNote)})
	d.count(r.Source, r.WorkflowID, claimMetrics(res)...)
	if res.FingerprintMismatch {
		fp := d.line(ev, HistoryLine{Kind: KindFingerprint, ExecutionID: id.ID, WorkflowID: r.WorkflowID,
			WorkflowName: r.WorkflowName, Decision: string(res.Decision), Message: "this delivery's fingerprint " +
				r.Fingerprint + " differs from the first one: the same key may name two different events"})
		d.alertEvent(ev, AlertFingerprint, fp.HistoryLine, "")
	}
	news := res.Delivery == DeliveryManualRetry
	for _, row := range rows {
		news = news || row.News && res.Delivery != DeliverySameExecution
	}
	if news {
		d.news(ev, h.HistoryLine, "")
	}
	d.linkPending(ev, id)
	return res, nil
}

// claimEntry decides one entry of a claim by the table.
func (d *Decider) claimEntry(e *Entry, id Identity) Row {
	row := d.decide(e, ActClaim, whoFor(e, id))
	d.apply(e, row, id.ID, false, "")
	return row
}

// rollUp sets an item event's status from its items: processing while any
// item is, else failed if any failed, else cancelled if all are, else
// done. holder, when set, becomes the event's holder.
func (d *Decider) rollUp(ev *Entry, holder string) {
	status, n, cancelled := StatusDone, 0, 0
	for k, e := range d.snap.Entries {
		if k.Item == "" || k.Source != ev.Source || k.EventID != ev.EventID || !exists(e) {
			continue
		}
		n++
		switch e.Status {
		case StatusProcessing:
			status = StatusProcessing
		case StatusFailed:
			if status != StatusProcessing {
				status = StatusFailed
			}
		case StatusCancelled:
			cancelled++
		}
	}
	if n > 0 && cancelled == n {
		status = StatusCancelled
	}
	changed := false
	if ev.Status != status {
		ev.Status, ev.Since, changed = status, d.now, true
	}
	if holder != "" && ev.Holder != holder {
		ev.Holder, changed = holder, true
	}
	if status != StatusProcessing && ev.Review != "" {
		ev.Review, changed = "", true
	}
	if changed {
		ev.Version++
	}
	ev.ItemCount, ev.LastSeen, ev.Dirty = n, d.now, true
}

// deliver records the claim's execution presenting the event: one that
// presented it before is the same execution, not a new delivery, and is
// not counted again; a new one is counted and classified.
func (d *Decider) deliver(ev *Entry, r ClaimRequest, id Identity, first bool, res *ClaimResult) {
	k := presenceKey{ev.EntryKey.Event(), id.ID}
	p := d.snap.Presences[k]
	presented := p != nil && p.Role == RoleClaim
	switch {
	case presented:
		res.Delivery = DeliverySameExecution
	case first:
		res.Delivery = DeliveryFirst
	case len(id.Chain) > 1:
		res.Delivery = DeliveryManualRetry
	default:
		res.Delivery = DeliveryRedelivery
	}
	if !first && !presented {
		res.Class = classify(res.Decision, len(id.Chain) > 1, ev, r.DeliveryID, r.WorkflowID, r.Fingerprint, d.now)
	}
	if ev.Fingerprint == "" {
		ev.Fingerprint = r.Fingerprint
	}
	res.FingerprintMismatch = r.Fingerprint != "" && ev.Fingerprint != r.Fingerprint
	if !presented {
		ev.Deliveries++
		if ev.FirstWorkflow == "" {
			ev.FirstWorkflow = r.WorkflowID
		}
		ev.LastDeliveryID, ev.LastPresentedAt = r.DeliveryID, d.now
		if p == nil {
			p = &Presence{Key: k.Event, ExecutionID: id.ID}
			d.snap.Presences[k] = p
		}
		p.Role, p.Delivery, p.DeliveryID, p.WorkflowID, p.Class = RoleClaim, res.Delivery, r.DeliveryID, r.WorkflowID, res.Class
	}
	p.Acted = p.Acted || res.Process
	p.Dirty, ev.Dirty = true, true
	res.Deliveries = ev.Deliveries
}

// classify says why a new execution presented a known key, given what the
// event says of the deliveries before.
func classify(dec Decision, lineage bool, ev *Entry, deliveryID, workflowID, fingerprint string, now time.Time) Class {
	switch {
	case lineage:
		return ClassManualRetry
	case dec == DecisionReclaimed:
		return ClassAfterFailure
	case ev.FirstWorkflow != "" && workflowID != "" && workflowID != ev.FirstWorkflow:
		return ClassParallelWorkflows
	}
	soon := !ev.LastPresentedAt.IsZero() && now.Sub(ev.LastPresentedAt) <= DoubleStartWindow
	samePrint := fingerprint == "" || ev.Fingerprint == "" || fingerprint == ev.Fingerprint
	switch {
	case deliveryID != "" && deliveryID == ev.LastDeliveryID && soon:
		return ClassDoubleStart
	case deliveryID == "" && ev.LastDeliveryID == "" && samePrint && soon:
		return ClassDoubleStart
	}
	return ClassSenderRetry
}

// claimMetrics are what one claim counts.
func claimMetrics(res ClaimResult) []string {
	if res.Delivery == DeliverySameExecution {
		return nil
	}
	m := []string{MetricDelivery}
	switch {
	case res.Delivery == DeliveryFirst:
		m = append(m, MetricFirst)
	case !res.Process:
		m = append(m, MetricStopped+string(res.Class))
	case res.Class == ClassManualRetry:
		m = append(m, MetricRetry)
	case res.Class == ClassAfterFailure:
		m = append(m, MetricCapture)
	}
	return m
}

func claimMessage(res ClaimResult, chain []string, note string) string {
	var b strings.Builder
	switch {
	case res.Delivery == DeliveryManualRetry && res.Decision == DecisionHeld:
		fmt.Fprintf(&b, "retry of %s: takes over the claim", strings.Join(chain[1:], " ← "))
	case res.Delivery == DeliveryManualRetry:
		fmt.Fprintf(&b, "retry of %s", strings.Join(chain[1:], " ← "))
	}
	for _, it := range res.Items {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", it.Item, it.Decision)
	}
	if note != "" {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(note)
	}
	return b.String()
}

// chainAt returns the chain's i-th execution, "" past its end.
func chainAt(chain []string, i int) string {
	if i < len(chain) {
		return chain[i]
	}
	return ""
}
