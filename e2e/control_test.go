//go:build n8n

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Limits of the waits, from the work they wait for.
const (
	// alertWithin: the error workflow runs, the intake records, the outbox
	// sends (one message a second per channel).
	alertWithin = time.Minute
	// reconcileWithin: the grace (15 s) and a pass (every 2 s).
	reconcileWithin = time.Minute
	// triggerErrorWithin: the feed is polled every minute; the first poll
	// after publishing may still succeed.
	triggerErrorWithin = 3 * time.Minute
)

// run is one control run: a service, and ids that do not clash with the
// other run's (n8n and the CRM are shared).
type run struct {
	*suite
	t          *testing.T // the run's, which outlives its steps
	backend    string
	svc        *service
	prefix     string
	n          int
	deliveries atomic.Int64
}

func (r *run) newID() string {
	r.n++
	return fmt.Sprintf("%s-%d", r.prefix, 1000+r.n)
}

func orderBody(id string) map[string]any {
	return map[string]any{"id": id, "total": "42.50", "currency": "EUR", "customer": "Ada"}
}

// deliver posts an order to a sender's webhook, as the sender does.
func (r *run) deliver(t *testing.T, path, id string) (int, map[string]any) {
	t.Helper()
	n := r.deliveries.Add(1) // the sender sends a new delivery id with each delivery
	return r.n8n.webhook(t, path, orderBody(id), map[string]string{"X-Delivery-Id": fmt.Sprintf("d-%s-%d", id, n)})
}

// ledger reads an event over /v1; it must exist.
func (r *run) ledger(t *testing.T, source, id string) ledgerEvent {
	t.Helper()
	e, ok := r.svc.event(t, source, id)
	if !ok {
		t.Fatalf("the ledger has no %s/%s", source, id)
	}
	return e
}

// oneOrder checks that the CRM holds the event's order, created with the
// idempotency key the ledger gave the claim, and returns it. (The CRM keeps
// one order per external id and per key: a second create is answered with
// the first order, so the create count tells whether one was sent.)
func (r *run) oneOrder(t *testing.T, source, id string) crmOrder {
	t.Helper()
	o, ok := r.crm.order(source + ":" + id)
	if !ok {
		t.Fatalf("the CRM has no order for %s/%s", source, id)
	}
	if e := r.ledger(t, source, id); o.IdempotencyKey != e.IdempotencyKey {
		t.Errorf("the CRM's order %s was created with idempotency key %q, the ledger's is %q", o.ID,
			o.IdempotencyKey, e.IdempotencyKey)
	}
	return o
}

// alert waits for the first Slack message about an event and checks that
// it names the source and event id.
func (r *run) alert(t *testing.T, source, id string) slackMessage {
	t.Helper()
	subject := source + " / " + id
	var m slackMessage
	eventually(t, alertWithin, "a Slack alert about "+subject, func() string {
		root, _, ok := r.slack.thread(subject)
		if !ok {
			return "no message yet"
		}
		m = root
		return ""
	})
	fields := m.fields()
	if fields["Source"] != source || fields["Event ID"] != id {
		t.Errorf("the alert about %s names source %q and event id %q", subject, fields["Source"], fields["Event ID"])
	}
	return m
}

// threadSays waits for a reply in an event's thread that contains every
// string of want.
func (r *run) threadSays(t *testing.T, source, id string, want ...string) {
	t.Helper()
	eventually(t, alertWithin, "a reply in the thread of "+source+"/"+id+" with "+strings.Join(want, ", "), func() string {
		_, replies, ok := r.slack.thread(source + " / " + id)
		if !ok {
			return "no thread"
		}
		var texts []string
	next:
		for _, m := range replies {
			texts = append(texts, m.Text)
			for _, w := range want {
				if !strings.Contains(m.Text+m.Blocks, w) {
					continue next
				}
			}
			return ""
		}
		return fmt.Sprintf("replies so far: %q", texts)
	})
}

// controlRun runs the control steps with retryaudit on one backend.
func (s *suite) controlRun(t *testing.T, backend string) {
	s.crm.reset()
	s.slack.reset()
	r := &run{suite: s, t: t, backend: backend, svc: s.startService(t, backend), prefix: map[string]string{"sqlite": "sq", "postgres": "pg"}[backend]}
	s.crm.resetFeed()
	s.n8n.publish(t, s.feed.ID)
	defer s.n8n.unpublish(t, s.feed.ID)

	steps := []step{
		{"the same body twice: one order, then duplicate", r.sameBodyTwice},
		{"several deliveries at once: one order", r.severalAtOnce},
		{"a new id: a new order", r.newID1},
		{"the same id from another source: its own entry and order", r.otherSource},
		{"a CRM that creates and never answers, then a Retry through n8n's API", r.createsNeverAnswers},
		{"a redelivery while the first run is still going", r.redeliveryWhileRunning},
		{"a Retry of a Retry", r.retryOfRetry},
		{"a 422, then a redelivery that reclaims", r.refusedThenReclaimed},
		{"the error workflow unpublished while a run fails: found by reconciliation", r.errorWorkflowUnpublished},
		{"the editor's test payload", r.editorTestPayload},
		{"a trigger error", r.triggerError},
	}
	if s.extra != nil {
		steps = append(steps, s.extra(r)...)
	}
	for _, st := range steps {
		start := time.Now()
		t.Run(st.name, st.fn) // each step stands alone: a failed one does not stop the rest
		t.Logf("timing: %-75s %6s", st.name, time.Since(start).Round(100*time.Millisecond))
	}
}

func (r *run) sameBodyTwice(t *testing.T) {
	id := r.newID()
	status, out := r.deliver(t, "orders", id)
	if status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("the first delivery was answered %d %v; %s", status, out, r.n8n.lastRun(t, r.orders.ID))
	}
	o := r.oneOrder(t, "shop", id)
	status, out = r.deliver(t, "orders", id)
	if status != http.StatusOK || out["duplicate"] != true || out["decision"] != "duplicate" {
		t.Fatalf("the second delivery was answered %d %v, want 200 duplicate; %s", status, out, r.n8n.lastRun(t, r.orders.ID))
	}
	if n := r.crm.count(); n != 1 {
		t.Errorf("the CRM holds %d orders, want 1", n)
	}
	e := r.ledger(t, "shop", id)
	if e.Status != "done" || e.Deliveries != 2 || e.CRMRef != o.ID || strings.Join(e.decisions(), ",") != "claimed,duplicate" {
		t.Errorf("ledger: status %s, deliveries %d, crm_ref %q, decisions %v", e.Status, e.Deliveries, e.CRMRef, e.decisions())
	}
	for _, x := range e.Executions {
		if x.Role == "claim" && !strings.HasPrefix(x.DeliveryID, "d-"+id+"-") {
			t.Errorf("execution %s was recorded with delivery id %q: the Event node's delivery_id did not reach the claim",
				x.ExecutionID, x.DeliveryID)
		}
	}
	if page := r.svc.eventPage(t, "shop", id); !strings.Contains(page, o.ID) || !strings.Contains(page, "done") {
		t.Error("the audit row shows neither the CRM reference nor done")
	}
}

func (r *run) severalAtOnce(t *testing.T) {
	id := r.newID()
	const n = 6
	var wg sync.WaitGroup
	answers := make([]map[string]any, n)
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], answers[i] = r.deliver(t, "orders", id)
		}()
	}
	wg.Wait()
	done := 0
	for i := range n {
		switch {
		case codes[i] == http.StatusOK && answers[i]["outcome"] == "done":
			done++
		case codes[i] == http.StatusOK && answers[i]["duplicate"] == true:
		default:
			t.Errorf("a delivery was answered %d %v; %s", codes[i], answers[i], r.n8n.lastRun(t, r.orders.ID))
		}
	}
	if done != 1 {
		t.Errorf("%d deliveries ran the CRM step, want 1", done)
	}
	r.oneOrder(t, "shop", id)
	e := r.ledger(t, "shop", id)
	claimed := 0
	for _, d := range e.decisions() {
		if d == "claimed" {
			claimed++
		}
	}
	if e.Status != "done" || e.Deliveries != n || claimed != 1 {
		t.Errorf("ledger: status %s, deliveries %d, decisions %v", e.Status, e.Deliveries, e.decisions())
	}
}

func (r *run) newID1(t *testing.T) {
	before := r.crm.count()
	id := r.newID()
	if status, out := r.deliver(t, "orders", id); status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("a new id was answered %d %v; %s", status, out, r.n8n.lastRun(t, r.orders.ID))
	}
	r.oneOrder(t, "shop", id)
	if got := r.crm.count(); got != before+1 {
		t.Errorf("the CRM holds %d orders, want %d", got, before+1)
	}
	if e := r.ledger(t, "shop", id); e.Status != "done" || strings.Join(e.decisions(), ",") != "claimed" {
		t.Errorf("ledger: %s %v", e.Status, e.decisions())
	}
}

func (r *run) otherSource(t *testing.T) {
	id := r.newID()
	if status, out := r.deliver(t, "orders", id); status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("shop: %d %v; %s", status, out, r.n8n.lastRun(t, r.orders.ID))
	}
	if status, out := r.deliver(t, "market-orders", id); status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("the same id from the marketplace was answered %d %v, want its own order; %s", status, out, r.n8n.lastRun(t, r.market.ID))
	}
	shop, market := r.oneOrder(t, "shop", id), r.oneOrder(t, "market", id)
	if shop.ID == market.ID {
		t.Errorf("both senders' %s share the CRM order %s", id, shop.ID)
	}
	for _, source := range []string{"shop", "market"} {
		if e := r.ledger(t, source, id); e.Status != "done" || e.Deliveries != 1 || strings.Join(e.decisions(), ",") != "claimed" {
			t.Errorf("%s/%s: %s, %d deliveries, %v", source, id, e.Status, e.Deliveries, e.decisions())
		}
	}
}

// hangingRun delivers an order while the CRM creates it and never answers:
// the CRM step fails the execution, the error workflow reports it. It
// returns the execution that holds the entry.
func (r *run) hangingRun(t *testing.T, id string) string {
	t.Helper()
	r.crm.setMode(crmHang)
	defer r.crm.setMode(crmNormal)
	status, out := r.deliver(t, "orders", id)
	if status != http.StatusInternalServerError {
		t.Fatalf("the sender was answered %d %v; a failed run answers 500", status, out)
	}
	if _, ok := r.crm.order("shop:" + id); !ok {
		t.Fatalf("the hanging CRM did not create the order; %s", r.n8n.lastRun(t, r.orders.ID))
	}
	holder := r.ledger(t, "shop", id).HolderExecutionID
	if x := r.n8n.waitExecution(t, holder); x.Status != "error" {
		t.Fatalf("n8n lists execution %s as %s; an unknown outcome must fail it so that it can be retried", holder, x.Status)
	}
	eventually(t, alertWithin, "the error workflow's (or the hooks') report on "+id, func() string {
		e := r.ledger(t, "shop", id)
		for _, er := range e.Errors {
			if er.ExecutionID == holder && (er.Kind == "execution_error" || er.Kind == "found_by_hook") {
				if !strings.Contains(er.Message, "CRM outcome unknown for shop/"+id) || er.Node != "Create CRM order" {
					return fmt.Sprintf("the error says %q in node %q", er.Message, er.Node)
				}
				return ""
			}
		}
		return fmt.Sprintf("errors %+v", e.Errors)
	})
	e := r.ledger(t, "shop", id)
	if e.Status != "processing" || !e.NeedsReview {
		t.Errorf("the entry is %s (review %v), want processing and in review", e.Status, e.NeedsReview)
	}
	return holder
}

func (r *run) createsNeverAnswers(t *testing.T) {
	id := r.newID()
	holder := r.hangingRun(t, id)
	m := r.alert(t, "shop", id)
	if !strings.Contains(m.Text, "n8n run failed") {
		t.Errorf("the alert says %q", m.Text)
	}
	links := m.buttons()
	want := map[string]string{
		"Audit row":     r.svc.URL + "/events/shop/" + id,
		"n8n execution": r.n8n.URL + "/workflow/" + r.orders.ID + "/executions/" + holder,
		"CRM order":     r.crm.URL + "/orders?external_id=shop:" + id,
	}
	for text, url := range want {
		if links[text] != url {
			t.Errorf("the alert's %q button leads to %q, want %q", text, links[text], url)
		}
	}
	for text, url := range links {
		status, body := r.svc.page(t, url)
		if status != http.StatusOK {
			t.Errorf("the alert's %q button (%s) answers %d", text, url, status)
		}
		if text == "Audit row" && !strings.Contains(body, id) {
			t.Errorf("the audit row does not name %s", id)
		}
	}

	// The person checks the CRM and presses Retry.
	creates := r.crm.createCount()
	x := r.n8n.retry(t, holder)
	if x.Mode != "retry" || x.RetryOf != holder || x.Status != "success" {
		t.Fatalf("the retry is %+v, want a successful retry of %s", x, holder)
	}
	if n := r.crm.createCount() - creates; n != 0 {
		t.Errorf("the retry sent %d creates for an order the CRM had", n)
	}
	o := r.oneOrder(t, "shop", id)
	e := r.ledger(t, "shop", id)
	if e.Status != "done" || e.CRMRef != o.ID {
		t.Errorf("after the retry the entry is %s with crm_ref %q, want done with %s", e.Status, e.CRMRef, o.ID)
	}
	r.doneByRetry(t, e, x.ID, holder)
	page := r.svc.eventPage(t, "shop", id)
	for _, want := range []string{x.ID, holder, "retry"} {
		if !strings.Contains(page, want) {
			t.Errorf("the audit row lacks %q (the retry chain)", want)
		}
	}
	r.threadSays(t, "shop", id, x.ID, "done")
}

// doneByRetry checks the history's outcome line: done, by the retry, in
// the holder's chain ("done by retry 32 of 30").
func (r *run) doneByRetry(t *testing.T, e ledgerEvent, retry, holder string) {
	t.Helper()
	for _, h := range e.History {
		if h.Kind == "outcome" && h.ExecutionID == retry {
			if h.Status != "done" || !strings.Contains(h.Message, "retry "+retry) || !strings.Contains(h.Message, holder) {
				t.Errorf("the outcome of retry %s reads %q (status %s), want done by retry %s of %s",
					retry, h.Message, h.Status, retry, holder)
			}
			return
		}
	}
	t.Errorf("the history has no outcome from retry %s: %+v", retry, e.History)
}

func (r *run) redeliveryWhileRunning(t *testing.T) {
	id := r.newID()
	r.crm.setMode(crmSlow)
	defer r.crm.setMode(crmNormal)
	type answer struct {
		status int
		out    map[string]any
	}
	first := make(chan answer, 1)
	go func() {
		status, out := r.deliver(t, "orders", id)
		first <- answer{status, out}
	}()
	eventually(t, time.Minute, "the first run's claim", func() string {
		if e, ok := r.svc.event(t, "shop", id); !ok || e.Status != "processing" {
			return "not claimed yet"
		}
		return ""
	})
	status, out := r.deliver(t, "orders", id)
	if status != http.StatusOK || out["decision"] != "in_progress" || out["duplicate"] != true {
		t.Errorf("the redelivery was answered %d %v, want in_progress and nothing done", status, out)
	}
	a := <-first
	if a.status != http.StatusOK || a.out["outcome"] != "done" {
		t.Errorf("the first run was answered %d %v; %s", a.status, a.out, r.n8n.lastRun(t, r.orders.ID))
	}
	r.oneOrder(t, "shop", id)
	e := r.ledger(t, "shop", id)
	if e.Status != "done" || strings.Join(e.decisions(), ",") != "claimed,in_progress" {
		t.Errorf("ledger: %s %v", e.Status, e.decisions())
	}
}

func (r *run) retryOfRetry(t *testing.T) {
	id := r.newID()
	holder := r.hangingRun(t, id)
	creates := r.crm.createCount()

	// The CRM answers lookups with something the step cannot read: the
	// retry fails again and creates nothing (fail closed).
	r.crm.setMode(crmGarbled)
	first := r.n8n.retry(t, holder)
	r.crm.setMode(crmNormal)
	if first.Status != "error" || first.RetryOf != holder {
		t.Fatalf("the first retry is %+v, want a failed retry of %s", first, holder)
	}
	if r.crm.createCount() != creates {
		t.Fatalf("a lookup that could not be read was taken for absent: %d more creates", r.crm.createCount()-creates)
	}
	eventually(t, alertWithin, "the first retry's error on the event", func() string {
		for _, er := range r.ledger(t, "shop", id).Errors {
			if er.ExecutionID == first.ID {
				if !strings.Contains(er.Message, "cannot be read") {
					return "it says " + er.Message
				}
				return ""
			}
		}
		return "not linked yet"
	})
	if e := r.ledger(t, "shop", id); e.Status != "processing" {
		t.Fatalf("after a failed retry the entry is %s", e.Status)
	}

	second := r.n8n.retry(t, first.ID)
	if second.Status != "success" || second.RetryOf != first.ID {
		t.Fatalf("the retry of the retry is %+v", second)
	}
	o := r.oneOrder(t, "shop", id)
	if r.crm.createCount() != creates {
		t.Errorf("the retries sent %d creates for an order the CRM had", r.crm.createCount()-creates)
	}
	e := r.ledger(t, "shop", id)
	if e.Status != "done" || e.CRMRef != o.ID {
		t.Errorf("after the retry of the retry: %s, crm_ref %q", e.Status, e.CRMRef)
	}
	r.doneByRetry(t, e, second.ID, holder)
	page := r.svc.eventPage(t, "shop", id)
	for _, want := range []string{second.ID, first.ID, holder} {
		if !strings.Contains(page, want) {
			t.Errorf("the audit row lacks execution %s of the chain", want)
		}
	}
}

func (r *run) refusedThenReclaimed(t *testing.T) {
	id := r.newID()
	r.crm.setMode(crm422)
	status, out := r.deliver(t, "orders", id)
	r.crm.setMode(crmNormal)
	if status != http.StatusServiceUnavailable || out["outcome"] != "failed" {
		t.Fatalf("a refused order was answered %d %v, want 503 failed (the sender tries again); %s", status, out, r.n8n.lastRun(t, r.orders.ID))
	}
	if _, ok := r.crm.order("shop:" + id); ok {
		t.Fatal("the CRM has an order it refused")
	}
	if e := r.ledger(t, "shop", id); e.Status != "failed" {
		t.Fatalf("after the refusal the entry is %s", e.Status)
	}
	status, out = r.deliver(t, "orders", id)
	if status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("the redelivery was answered %d %v; %s", status, out, r.n8n.lastRun(t, r.orders.ID))
	}
	r.oneOrder(t, "shop", id)
	if e := r.ledger(t, "shop", id); e.Status != "done" || strings.Join(e.decisions(), ",") != "claimed,reclaimed" {
		t.Errorf("ledger: %s %v", e.Status, e.decisions())
	}
}

func (r *run) errorWorkflowUnpublished(t *testing.T) {
	id := r.newID()
	if r.tap != nil {
		defer r.tap.pause()() // the hooks would report it first
	}
	r.n8n.unpublish(t, r.errors.ID)
	r.crm.setMode(crm500)
	status, out := r.deliver(t, "orders", id)
	r.crm.setMode(crmNormal)
	r.n8n.publish(t, r.errors.ID)
	if status != http.StatusInternalServerError {
		t.Fatalf("the sender was answered %d %v", status, out)
	}
	holder := r.ledger(t, "shop", id).HolderExecutionID
	if x := r.n8n.waitExecution(t, holder); x.Status != "error" {
		t.Fatalf("execution %s is %s", holder, x.Status)
	}
	eventually(t, reconcileWithin, "reconciliation finding execution "+holder, func() string {
		for _, er := range r.ledger(t, "shop", id).Errors {
			if er.ExecutionID == holder {
				if er.Kind != "found_by_reconcile" || !strings.Contains(er.Message, "CRM outcome unknown for shop/"+id) {
					return fmt.Sprintf("recorded as %s: %q", er.Kind, er.Message)
				}
				return ""
			}
		}
		return "not found yet"
	})
	e := r.ledger(t, "shop", id)
	if e.Status != "processing" || !e.NeedsReview {
		t.Errorf("the entry is %s (review %v)", e.Status, e.NeedsReview)
	}
	r.alert(t, "shop", id)
}

func (r *run) editorTestPayload(t *testing.T) {
	r.n8n.runManually(t, r.errors.ID, "Error Trigger")
	eventually(t, time.Minute, "the editor's test payload on the Errors page", func() string {
		status, body := r.svc.page(t, "/errors?kind=test_payload")
		if status != http.StatusOK || !strings.Contains(body, "Example Workflow") {
			return fmt.Sprintf("%d, no Example Workflow", status)
		}
		return ""
	})
	time.Sleep(2 * time.Second) // the outbox would have sent an alert by now
	if m := r.slack.about("Example Workflow"); len(m) > 0 {
		t.Errorf("the editor's test payload alerted: %q", m[0].Text)
	}
}

func (r *run) triggerError(t *testing.T) {
	eventually(t, triggerErrorWithin, "the failing feed's trigger error", func() string {
		status, body := r.svc.page(t, "/errors?kind=trigger_error")
		if status != http.StatusOK || !strings.Contains(body, "Feed that fails") {
			return fmt.Sprintf("%d, not listed", status)
		}
		return ""
	})
	eventually(t, alertWithin, "the trigger error's alert", func() string {
		for _, m := range r.slack.about("linked to no event") {
			if strings.Contains(m.Blocks, "trigger_error") {
				return ""
			}
		}
		return "no alert"
	})
}
