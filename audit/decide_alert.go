package audit

import (
	"cmp"
	"fmt"
	"strings"
)

// alertEvent writes an alert about an entry's event from the history line
// that caused it: the first alert opens the event's thread (and is
// counted), later ones reply in it and refresh its first message.
func (d *Decider) alertEvent(e *Entry, kind string, h HistoryLine, errorKey string) {
	ev := d.event(e)
	a := d.eventAlert(ev, kind, h)
	thread := EventThread(ev.Source, ev.EventID)
	if ev.Alerted {
		d.reply(thread, a, errorKey)
		return
	}
	d.plan.Notices = append(d.plan.Notices, Notice{Thread: thread, Role: RowAlert, Alert: a, ErrorKey: errorKey})
	d.count(a.Source, a.WorkflowID, MetricAlert+a.Kind)
	ev.Alerted, ev.Dirty = true, true
}

// news tells an alerted event's thread what a history line says; an event
// nobody was alerted about gets no message.
func (d *Decider) news(e *Entry, h HistoryLine, errorKey string) {
	ev := d.event(e)
	if !ev.Alerted {
		return
	}
	d.reply(EventThread(ev.Source, ev.EventID), d.eventAlert(ev, AlertNews, h), errorKey)
}

func (d *Decider) reply(thread string, a Alert, errorKey string) {
	d.plan.Notices = append(d.plan.Notices,
		Notice{Thread: thread, Role: RowFollowup, Alert: a, ErrorKey: errorKey},
		Notice{Thread: thread, Role: RowRefresh, ErrorKey: errorKey,
			Alert: Alert{Kind: a.Kind, Source: a.Source, EventID: a.EventID, At: d.now}})
}

// eventAlert is the alert a history line makes, with what the service
// knows of its event and its execution.
func (d *Decider) eventAlert(ev *Entry, kind string, h HistoryLine) Alert {
	a := Alert{
		Kind: kind, Source: ev.Source, EventID: ev.EventID, Item: h.Item, Status: ev.Status, Since: ev.Since,
		Deliveries: ev.Deliveries, CRMRef: ev.CRMRef, WorkflowID: h.WorkflowID, WorkflowName: h.WorkflowName,
		Node: h.Node, ExecutionID: h.ExecutionID, RetryOf: h.RetryOf, Message: h.Message,
		News: h.Kind, Decision: h.Decision, Delivery: h.Delivery, Actor: h.Actor, At: d.now,
	}
	if x := d.snap.Execs[h.ExecutionID]; x != nil {
		// An outcome report or the stale detector says less about the
		// execution than its claim did: fill in what the service knows.
		a.WorkflowID, a.WorkflowName = cmp.Or(a.WorkflowID, x.WorkflowID), cmp.Or(a.WorkflowName, x.WorkflowName)
		a.N8NURL, a.RetryOf = x.URL, cmp.Or(a.RetryOf, x.RetryOf)
	}
	return a
}

// idReset tells people, once per n8n instance and repeat interval, that
// n8n handed an execution id out again: it was restored from a backup,
// moved to a new database, or a second n8n shares its ids. The ids a
// restore reuses come over the following minutes: one alert tells of
// them all. (Reports that come late, or twice, are never taken for a
// reuse: no alert is sent wrongly to hide a later one.)
func (d *Decider) idReset(n8nID, known string, x *Exec, why string) {
	instance := DefaultInstance
	if _, in, ok := strings.Cut(n8nID, InstanceSep); ok {
		instance = in
	}
	a := Alert{Kind: AlertIDReset, ExecutionID: x.ID, At: d.now, Message: fmt.Sprintf(
		"n8n (instance %s) gave execution id %s to a new execution; the service knew another one under it, now %s: %s. "+
			"Was n8n restored from a backup, or moved to a new database? Lineage and holds recorded for the old "+
			"executions do not apply to the new ones; redeliveries of events the old ones claimed are told to wait.",
		instance, N8NID(n8nID), known, why)}
	d.plan.Groups = append(d.plan.Groups, GroupNotice{Kind: AlertIDReset, WorkflowID: instance, Alert: a})
}
