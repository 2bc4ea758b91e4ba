package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UnlinkedGrace delays the alert about an execution error that links to no
// event yet: the claim it belongs to may be a moment behind, and then the
// event's own alert replaces it.
const UnlinkedGrace = 30 * time.Second

// Error decides an error report: its execution (with what n8n's API said,
// word), then, once per dedupe key, the error's record, linked to the
// events its execution (or the nearest one it retries) touched, and on each
// of them what the table says of an error: the holder's puts the entry in
// review and alerts; anyone else's is a line. An error linked to nothing
// is alerted in its group. A second report of a recorded error fills in
// what the first lacked.
func (d *Decider) Error(r N8NErrorReport, word *N8NWord) N8NErrorResult {
	var id Identity
	if r.ExecutionID != "" && (r.Kind == N8NErrorExecution || r.Kind == N8NErrorReconcile) {
		s := Sighting{Kind: SeenError, ID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
			Mode: r.Mode, URL: r.URL, Word: word}
		switch {
		case r.Kind == N8NErrorReconcile:
			s.RetryOf = r.RetryOf // read from n8n's API
		case word.ok():
			if r.RetryOf != word.Self.RetryOf {
				s.ClaimedRetryOf = r.RetryOf
			}
		default:
			s.ClaimedRetryOf = r.RetryOf
		}
		id = d.identify(s)
	}
	return d.recordError(r, id)
}

// recordError records a report whose execution is id (none for a report
// of no execution, or one refused as not the known one).
func (d *Decider) recordError(r N8NErrorReport, id Identity) N8NErrorResult {
	if id.ID != "" && id.ID != r.ExecutionID {
		// A new execution reusing an id: its error is its own, not a
		// duplicate of the one the old execution had.
		if r.DedupeKey == "exec:"+r.ExecutionID {
			r.DedupeKey = "exec:" + id.ID
		}
		r.ExecutionID = id.ID
	}
	if id.Reset != "" {
		r.AddNote(id.Reset)
	}
	if id.Refused != "" {
		r.AddNote(id.Refused)
	}
	res := N8NErrorResult{Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf, DedupeKey: r.DedupeKey}
	if first, ok := d.errKeys[r.DedupeKey]; ok {
		first.Duplicate = true // recorded by this batch: the first report stands
		return first
	}
	if old, ok := d.snap.Errors[r.DedupeKey]; ok {
		return d.duplicateError(r, old)
	}
	events, root := d.linkedEvents(id)
	w := ErrorWrite{Report: r, Root: cmp.Or(root, r.ExecutionID)}
	if len(events) > 0 {
		w.Link, res.Linked = &events[0], &events[0]
	}
	d.errKeys[r.DedupeKey] = res
	d.plan.Errors = append(d.plan.Errors, w)
	rec := N8NErrorRecord{Kind: r.Kind, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf, WorkflowID: r.WorkflowID,
		WorkflowName: r.WorkflowName, Node: r.Node, Message: r.Message, URL: r.URL}
	if len(events) == 0 {
		d.unlinked(r)
		return res
	}
	for _, ev := range events {
		d.errorOnEntry(ev, rec, r.DedupeKey, id.Chain)
	}
	return res
}

// linkedEvents returns the events an error's execution touched, or those of
// the nearest execution it retries that touched any; failing those, those
// of the root a reported retryOf names (for people to see: it makes the
// error no error of the holder). root is the error's lineage's root.
func (d *Decider) linkedEvents(id Identity) ([]EventKey, string) {
	if id.ID == "" {
		return nil, ""
	}
	for _, x := range id.Chain {
		if evs := d.snap.events(x); len(evs) > 0 {
			return evs, d.rootOf(id.ID)
		}
	}
	root := d.rootOf(id.ID)
	if root != "" && !slices.Contains(id.Chain, root) {
		return d.snap.events(root), root
	}
	return nil, root
}

func (d *Decider) rootOf(id string) string {
	if x := d.snap.Execs[id]; x != nil {
		return cmp.Or(x.Root, x.ID)
	}
	return id
}

// errorOnEntry writes what an error says of an event it is linked to: the
// execution's presence, the history line, and what the table says (the
// holder's error puts a processing entry in review and alerts). chain is
// the error's execution and what it retries.
func (d *Decider) errorOnEntry(evKey EventKey, rec N8NErrorRecord, errorKey string, chain []string) {
	ev := d.snap.Entries[EntryKey{Source: evKey.Source, EventID: evKey.EventID}]
	if !exists(ev) {
		return // deleted by retention since: the link is all there is
	}
	d.present(ev, rec.ExecutionID, RoleError, rec.WorkflowID)
	who := WhoOther
	if len(chain) > 0 {
		who = d.errorWho(ev, chain)
	}
	row := d.decide(ev, ActError, who)
	msg := Truncate(rec.Message, 500)
	if ev.Status == StatusProcessing && who == WhoOther {
		why := d.whyNotActing(evKey, chain, rec.ExecutionID)
		if rec.RetryOf != "" && (len(chain) < 2 || N8NID(chain[1]) != rec.RetryOf) {
			why += fmt.Sprintf(" (reported as a retry of %s; n8n did not confirm it)", rec.RetryOf)
		}
		msg = Truncate(fmt.Sprintf("%s; the entry is not affected (holder %s): %s", why, ev.Holder, rec.Message), 500)
	}
	d.apply(ev, row, "", false, "")
	h := d.line(ev, HistoryLine{Kind: KindError, ExecutionID: rec.ExecutionID, RetryOf: rec.RetryOf,
		WorkflowID: rec.WorkflowID, WorkflowName: rec.WorkflowName, Node: rec.Node, Decision: rec.Kind, Message: msg})
	h.ErrorKey = errorKey
	switch {
	case row.Alert != "":
		d.alertEvent(ev, row.Alert, h.HistoryLine, errorKey)
	case row.News && ev.Status != StatusProcessing:
		d.news(ev, h.HistoryLine, errorKey)
	}
}

// errorWho says who an error's execution is, seen from an event: the
// holder when it (or what it retries) holds the event or one of its items,
// or when nobody holds it (a row written by hand).
func (d *Decider) errorWho(ev *Entry, chain []string) Who {
	if ev.Holder == "" || slices.Contains(chain, ev.Holder) {
		return WhoHolder
	}
	for k, e := range d.snap.Entries {
		if k.Item != "" && k.Source == ev.Source && k.EventID == ev.EventID && e.Status == StatusProcessing &&
			slices.Contains(chain, e.Holder) {
			return WhoHolder
		}
	}
	return WhoOther
}

// whyNotActing says what an error's execution (or the one it retries) was
// told about an event it does not hold.
func (d *Decider) whyNotActing(ev EventKey, chain []string, id string) string {
	for _, x := range chain {
		p := d.snap.Presences[presenceKey{ev, x}]
		switch {
		case p == nil || p.Role == RoleError:
			continue
		case p.Acted:
			return fmt.Sprintf("error of execution %s, which acted before but no longer holds the entry", x)
		case p.Role == RoleClaim:
			// It did not act, so the entry was processing (it was told in
			// progress), done or cancelled when it claimed: the last two
			// are final.
			told := "in progress"
			switch e := d.snap.Entries[EntryKey{Source: ev.Source, EventID: ev.EventID}]; e.Status {
			case StatusDone:
				told = "duplicate"
			case StatusCancelled:
				told = "cancelled"
			}
			return fmt.Sprintf("error of execution %s, which was told %s and did nothing", x, told)
		}
	}
	return fmt.Sprintf("error of execution %s, which does not hold the entry", cmp.Or(chainAt(chain, 0), id))
}

// unlinked alerts about an error that belongs to no event (yet), in its
// group: the first of a repeat interval opens a thread, the others are
// counted in it. An execution's error waits a moment: its claim may be
// behind it.
func (d *Decider) unlinked(r N8NErrorReport) {
	if r.Kind == N8NErrorTest {
		return
	}
	var due int64
	if r.Kind == N8NErrorExecution {
		due = int64(UnlinkedGrace / time.Second)
	}
	a := Alert{Kind: AlertUnlinkedError, ErrorKind: r.Kind, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
		Node: r.Node, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf, N8NURL: r.URL, Message: r.Message, At: d.now}
	d.plan.Groups = append(d.plan.Groups, GroupNotice{Kind: r.Kind, WorkflowID: r.WorkflowID, Node: r.Node, Alert: a,
		ErrorKey: r.DedupeKey, Due: due, Count: true})
}

// duplicateError answers a report of an error recorded before. A payload
// and a reconciliation record describe the same execution: whichever comes
// second fills in what the first lacks.
func (d *Decider) duplicateError(r N8NErrorReport, old N8NErrorRecord) N8NErrorResult {
	res := N8NErrorResult{Kind: r.Kind, Duplicate: true, ExecutionID: r.ExecutionID, RetryOf: r.RetryOf,
		DedupeKey: r.DedupeKey}
	res.ID, res.Kind, res.ExecutionID, res.RetryOf = old.ID, old.Kind, old.ExecutionID, old.RetryOf
	if m, changed := MergeError(old, r); changed {
		d.plan.Errors = append(d.plan.Errors, ErrorWrite{Report: r, Merge: &m})
		d.snap.Errors[r.DedupeKey] = m
		res.RetryOf = m.RetryOf
	}
	if ev, ok := old.Linked(); ok {
		res.Linked = &ev
	}
	return res
}

// MergeError returns the stored record e with what a second report of the
// same execution adds, and whether anything changed. Empty fields are filled
// in; a payload is kept when the record has none (a reconciliation record
// has none, and one whose payload retention dropped stays dropped). The
// message that carries n8n's own words is kept: a payload's message replaces
// a reconciliation record's only when that one lacks n8n's error (n8n had
// pruned the execution's data), and a reconciliation record never replaces
// a payload's message, which n8n wrote.
func MergeError(e N8NErrorRecord, r N8NErrorReport) (N8NErrorRecord, bool) {
	m := e
	m.RetryOf = cmp.Or(e.RetryOf, r.RetryOf)
	m.WorkflowID = cmp.Or(e.WorkflowID, r.WorkflowID)
	m.WorkflowName = cmp.Or(e.WorkflowName, r.WorkflowName)
	m.Mode = cmp.Or(e.Mode, r.Mode)
	m.Node = cmp.Or(e.Node, r.Node)
	m.HTTPCode = cmp.Or(e.HTTPCode, r.HTTPCode)
	m.URL = cmp.Or(e.URL, r.URL)
	if e.Payload == "" && !e.PayloadDropped && r.Payload != "" {
		m.Payload, m.PayloadTruncated = r.Payload, r.Truncated
	}
	switch {
	case e.Message == "" || e.Message == DefaultMessage(e.Kind, nil):
		m.Message = cmp.Or(r.Message, e.Message)
	case (e.Kind == N8NErrorReconcile || e.Kind == N8NErrorHook) && r.Kind == N8NErrorExecution &&
		r.Message != DefaultMessage(r.Kind, nil) && !strings.Contains(e.Message, r.Message):
		m.Message = r.Message
	}
	return m, m != e
}

// linkPending links the errors recorded before a claim of their execution
// (or of an execution in its chain) to the claimed event, and writes what
// each says of it.
func (d *Decider) linkPending(ev *Entry, id Identity) {
	for i := range d.snap.Pending {
		p := &d.snap.Pending[i]
		if p.Linked || !slices.Contains(id.Chain, p.ExecutionID) && !slices.Contains(id.Chain, p.Root) {
			continue
		}
		p.Linked = true
		k := ev.EntryKey.Event()
		d.plan.Links = append(d.plan.Links, ErrorLink{ID: p.ID, Event: k})
		rec := p.Record
		h := d.snap.chain(rec.ExecutionID)
		d.errorOnEntryID(k, rec, h)
	}
}

// errorOnEntryID is errorOnEntry for an error recorded before (its id
// known).
func (d *Decider) errorOnEntryID(ev EventKey, rec N8NErrorRecord, chain []string) {
	n := len(d.plan.Lines)
	m := len(d.plan.Notices)
	d.errorOnEntry(ev, rec, "", chain)
	id := rec.ID
	for i := n; i < len(d.plan.Lines); i++ {
		d.plan.Lines[i].ErrorID = &id
	}
	for i := m; i < len(d.plan.Notices); i++ {
		d.plan.Notices[i].Alert.ErrorID = id
	}
}
