package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// The cases below are the ways two executions could act, or an outcome be
// lost, that the store's rewrite as lock → decide → write was made for
// (issue 30): each failed on the store before it, on both databases.

// formOf reads the resolve form's hidden fields from an event's page.
func formOf(t *testing.T, page string) url.Values {
	t.Helper()
	i := strings.Index(page, `<form class="resolve"`)
	if i < 0 {
		t.Fatalf("no resolve form:\n%s", page)
	}
	form := page[i:]
	form = form[:strings.Index(form, "</form>")]
	v := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], m[2])
	}
	return v
}

// withClock pins the handlers' and the store's time.
func withClock(c *audittest.Clock) func(*handlers.Config, *store.Options) {
	return func(cfg *handlers.Config, o *store.Options) { cfg.Now, o.Now = c.Now, c.Now }
}

// Case 1: a stale or double-submitted resolve form never overrules what
// happened since the page was loaded. A person's failed, then the holder's
// done (a contradiction: the CRM may have the order), then a form loaded
// before all this says failed: it is refused, the page marks what changed,
// and the next delivery is told to wait, not to act.
func TestStaleFormsAreRefused(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		alice, bob := "alice:"+alicePassword, "bob:bob's password"
		s.claim(t, claimBody("shop", "sf1", "40"))
		_, bobsPage := s.page(t, "GET", "/events/shop/sf1", bob, nil)
		old := formOf(t, bobsPage)
		_, page := s.page(t, "GET", "/events/shop/sf1", alice, nil)
		form := formOf(t, page)
		form.Set("to", "failed")
		form.Set("note", "no order in the CRM")
		form.Set("confirm", "yes")
		if resp, body := s.page(t, "POST", "/events/shop/sf1", alice, form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("alice's resolution: %d\n%s", resp.StatusCode, body)
		}
		done := outcomeBody("sf1", "40", "done")
		done["crm_ref"] = "CRM-9"
		if code, out := s.outcome(t, done); code != http.StatusOK || out["status"] != "processing" || out["needs_review"] != true {
			t.Fatalf("the holder's done after the person's failed: %d %v", code, out)
		}
		old.Set("to", "failed")
		old.Set("note", "no order (an old page)")
		old.Set("confirm", "yes")
		resp, body := s.page(t, "POST", "/events/shop/sf1", bob, old)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "changed since the page was loaded") ||
			!strings.Contains(body, "since your page") {
			t.Errorf("bob's stale form: %d, want 409 naming what changed\n%s", resp.StatusCode, body)
		}
		if ev := s.event(t, "shop", "sf1"); ev["status"] != "processing" || ev["review_reason"] != "contradiction" {
			t.Errorf("the stale form moved the entry: %v %v", ev["status"], ev["review_reason"])
		}
		if out := s.claim(t, claimBody("shop", "sf1", "41")); out["process"] != false || out["decision"] != "in_progress" {
			t.Errorf("the redelivery after the stale form: %v", out)
		}

		// One form submitted twice is one resolution; twice with the
		// holder's done between, the second is refused.
		s.claim(t, claimBody("shop", "sf2", "50"))
		_, page = s.page(t, "GET", "/events/shop/sf2", alice, nil)
		form = formOf(t, page)
		form.Set("to", "failed")
		form.Set("note", "no order")
		form.Set("confirm", "yes")
		for i := 0; i < 2; i++ {
			if resp, body := s.page(t, "POST", "/events/shop/sf2", alice, form); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("submit %d: %d\n%s", i+1, resp.StatusCode, body)
			}
		}
		if n := len(linesOfKind(s.history(t, "shop", "sf2"), "resolution")); n != 1 {
			t.Errorf("%d resolution lines for one form sent twice, want 1", n)
		}
		s.outcome(t, outcomeBody("sf2", "50", "done"))
		if resp, _ := s.page(t, "POST", "/events/shop/sf2", alice, form); resp.StatusCode != http.StatusConflict {
			t.Errorf("the same form after the holder's done: %d, want 409", resp.StatusCode)
		}
		if out := s.claim(t, claimBody("shop", "sf2", "51")); out["process"] != false {
			t.Errorf("the redelivery after the resent form: %v", out)
		}
	})
}

func linesOfKind(lines []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["kind"] == kind {
			out = append(out, l)
		}
	}
	return out
}

// restored is a claim of a new execution that a restored n8n gave an old
// id: the workflow makes a new run stamp.
func restored(event, id string) map[string]any {
	body := claimBody("shop", event, id)
	body["run_stamp"] = id + ":1764999999999:restored"
	return body
}

// Cases 2, 3 and 4: after an n8n restore, the claim of a new execution that
// reuses an old id reaches the service before its hook start (hooks on;
// with n8n's API timing out or not knowing the id): it is another
// execution, told to wait where the old one holds the event, and the
// rightful holder of a new event is not refused when the hook start comes
// late.
func TestRestoredIDBeforeItsHookStart(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		for _, api := range []bool{false, true} {
			name := map[bool]string{false: "hooks, no API", true: "hooks and an API that does not know the id"}[api]
			t.Run(name, func(t *testing.T) {
				edit := []func(*handlers.Config, *store.Options){withHookToken}
				if api {
					edit = append(edit, withLookup(newFakeLookup())) // answers 404 for every id
				}
				s := newServer(t, dialect, edit...)
				s.claim(t, claimBody("shop", "rs1", "41")) // old 41 claims, then dies with n8n
				s.claim(t, claimBody("shop", "rs0", "42"))
				// n8n is restored: 41 and 42 are new executions.
				out := s.claim(t, restored("rs1", "41"))
				if out["process"] != false || out["decision"] != "in_progress" {
					t.Errorf("the new 41's claim of the old 41's event: %v, want in_progress", out)
				}
				if out := s.claim(t, restored("rs2", "42")); out["decision"] != "claimed" {
					t.Fatalf("the new 42's claim of a new event: %v", out)
				}
				now := time.Now().UTC().Format(time.RFC3339Nano)
				for _, id := range []string{"41", "42"} {
					if code, out := s.hooks(t, reports(map[string]any{"phase": "start", "execution_id": id,
						"workflow_id": "wf1", "mode": "webhook", "started_at": now})); code != http.StatusAccepted {
						t.Fatalf("hook start of %s: %d %v", id, code, out)
					}
				}
				done := outcomeBody("rs2", "42", "done")
				done["run_stamp"] = "42:1764999999999:restored"
				if code, out := s.outcome(t, done); code != http.StatusOK || out["changed"] != true {
					t.Errorf("the new 42's done of its own event: %d %v", code, out)
				}
				if ev := s.event(t, "shop", "rs1"); ev["holder_execution_id"] != "41" || ev["status"] != "processing" {
					t.Errorf("rs1 = %v %v", ev["holder_execution_id"], ev["status"])
				}
			})
		}
	})
}

// Case 5: a Wait node longer than a day: the holder's done is accepted,
// with its run stamp and, without one, because n8n's hooks said it waits;
// no alert says n8n's ids started again.
func TestAWaitLongerThanADay(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		clock := audittest.NewClock(time.Now().UTC())
		s := newServer(t, dialect, withHookToken, withClock(clock))
		for _, c := range []struct{ event, id string }{{"w1", "60"}, {"w2", "61"}} {
			s.claim(t, claimBody("shop", c.event, c.id))
			start := clock.Now().Format(time.RFC3339Nano)
			clock.Advance(time.Minute)
			end := hookEnd(c.id, "waiting")
			end["started_at"], end["stopped_at"] = start, clock.Now().Format(time.RFC3339Nano)
			if code, out := s.hooks(t, reports(end)); code != http.StatusAccepted {
				t.Fatalf("hook end (waiting): %d %v", code, out)
			}
		}
		clock.Advance(25 * time.Hour)
		if code, out := s.outcome(t, outcomeBody("w1", "60", "done")); code != http.StatusOK || out["changed"] != true {
			t.Errorf("the holder's done after a 25 h wait, with its stamp: %d %v", code, out)
		}
		bare := outcomeBody("w2", "61", "done")
		delete(bare, "run_stamp")
		if code, out := s.outcome(t, bare); code != http.StatusOK || out["changed"] != true {
			t.Errorf("the holder's done after a 25 h wait, n8n said it waits: %d %v", code, out)
		}
		if n := s.count(t, "outbox WHERE alert_kind = '"+audit.AlertIDReset+"'"); n != 0 {
			t.Errorf("%d alerts that n8n's ids started again", n)
		}
	})
}

// Case 6: an n8n Retry, confirmed by n8n, reporting failed after a person
// resolved the entry done is kept with a line and an alert: the order the
// person believed in may not exist.
func TestARetryContradictingAPersonsDone(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		n8n := newFakeLookup()
		s := newServer(t, dialect, withUI, withLookup(n8n))
		s.claim(t, claimBody("shop", "cr1", "70"))
		n8n.add("70", "webhook", "")
		s.outcome(t, outcomeBody("cr1", "70", "unknown"))
		_, page := s.page(t, "GET", "/events/shop/cr1", "alice:"+alicePassword, nil)
		form := formOf(t, page)
		form.Set("to", "done")
		form.Set("note", "found it")
		if resp, body := s.page(t, "POST", "/events/shop/cr1", "alice:"+alicePassword, form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("resolve: %d\n%s", resp.StatusCode, body)
		}
		n8n.add("72", "retry", "70")
		failed := outcomeBody("cr1", "72", "failed")
		failed["run_stamp"] = stampOf("70") // n8n's Retry replays 70's stamp
		if code, out := s.outcome(t, failed); code != http.StatusConflict {
			t.Errorf("the Retry's failed on a done entry: %d %v, want 409", code, out)
		}
		if n := len(linesOfKind(s.history(t, "shop", "cr1"), "contradiction")); n != 1 {
			t.Errorf("%d contradiction lines, want 1", n)
		}
		if n := s.count(t, "outbox WHERE event_id = 'cr1' AND kind <> 'refresh' AND alert_kind = '"+
			audit.AlertContradiction+"'"); n != 1 {
			t.Errorf("%d contradiction alerts, want 1", n)
		}
	})
}

// Cases 7 and 9: a start report that arrives after its end (n8n's hooks
// sending what queued while the service was away), with the same start
// time, is the same execution, however often it comes: no new execution,
// no alert; and a real restore after it is alerted, once.
func TestLateHookReportsAreTheSameExecution(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withHookToken)
		s.claim(t, claimBody("shop", "lh1", "50"))
		start := hookEnd("50", "success")
		start["phase"] = "start"
		delete(start, "stopped_at")
		delete(start, "status")
		for _, r := range []map[string]any{hookEnd("50", "success"), start, start, hookEnd("50", "success")} {
			code, out := s.hooks(t, reports(r))
			if code != http.StatusAccepted || results(t, out)[0]["new_execution"] == true {
				t.Fatalf("a late report of 50: %d %v", code, out)
			}
		}
		if n := s.count(t, "outbox WHERE alert_kind = '"+audit.AlertIDReset+"'"); n != 0 {
			t.Errorf("%d alerts that n8n's ids started again for late reports", n)
		}
		later := hookEnd("50", "success")
		later["phase"], later["started_at"] = "start", "2026-03-02T10:00:00Z"
		delete(later, "stopped_at")
		delete(later, "status")
		if code, out := s.hooks(t, reports(later)); code != http.StatusAccepted || results(t, out)[0]["new_execution"] != true {
			t.Errorf("a start a day later (a restore): %d %v", code, out)
		}
		if n := s.count(t, "outbox WHERE alert_kind = '"+audit.AlertIDReset+"'"); n != 1 {
			t.Errorf("%d alerts for the restore, want 1", n)
		}
	})
}

// Case 8: after a restore, n8n's own answer beats stored lineage: the old
// 31 was a Retry of 30; the new 31 is a webhook execution, and n8n says so
// (without a start time): it is another execution, not held beside the new
// 30.
func TestNewExecutionOverStoredLineage(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		n8n := newFakeLookup()
		s := newServer(t, dialect, withLookup(n8n))
		n8n.add("30", "webhook", "")
		n8n.add("31", "retry", "30")
		s.claim(t, claimBody("shop", "nl0", "30"))
		retry := claimBody("shop", "nl0", "31")
		delete(retry, "run_stamp")
		if out := s.claim(t, retry); out["decision"] != "held" {
			t.Fatalf("the old 31 (a Retry of 30): %v", out)
		}
		// n8n restored: 30 and 31 are new webhook executions.
		n8n.add("30", "webhook", "")
		n8n.add("31", "webhook", "")
		s.claim(t, restored("nl1", "30"))
		bare := claimBody("shop", "nl1", "31")
		delete(bare, "run_stamp")
		out := s.claim(t, bare)
		if out["process"] != false || out["decision"] != "in_progress" {
			t.Errorf("the new 31 beside the new 30: %v, want in_progress", out)
		}
	})
}

// Case 10: an answer the database may or may not have recorded says so (503
// unknown, "resending is safe"), and busy is said only while the database
// answers; tested where the commit's answer can be lost (PostgreSQL,
// through a proxy that drops it) in audit/store's TestLostCommit.

// Case 11: contention is not shed: 20 keys, 50 executions each, ids shared
// across keys, 64 clients: at most 1 % busy, none unavailable.
func TestContentionOnSharedIDs(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		n8n := newFakeLookup()
		for e := 0; e < 50; e++ {
			n8n.add("x"+strconv.Itoa(e), "webhook", "")
		}
		s := newServer(t, dialect, withLookup(n8n))
		jobs := make(chan [2]int, 1000)
		for k := 0; k < 20; k++ { // each key's claims one after the other: they meet in batches
			for e := 0; e < 50; e++ {
				jobs <- [2]int{k, e}
			}
		}
		close(jobs)
		codes := make(chan int, 1000)
		done := make(chan struct{})
		for c := 0; c < 64; c++ {
			go func() {
				defer func() { done <- struct{}{} }()
				for j := range jobs {
					body := claimBody("shop", "k"+strconv.Itoa(j[0]), "x"+strconv.Itoa(j[1]))
					code, _ := s.call(t, "POST", "/v1/claims", body)
					codes <- code
				}
			}()
		}
		for c := 0; c < 64; c++ {
			<-done
		}
		close(codes)
		count := map[int]int{}
		for c := range codes {
			count[c]++
		}
		if count[http.StatusServiceUnavailable] > 10 || count[http.StatusOK]+count[http.StatusServiceUnavailable] != 1000 {
			t.Errorf("answers %v: want 1000, at most 10 of them 503", count)
		}
	})
}

// The new state, cancelled: a person marks an event never to be acted on;
// every later claim is told so, the holder's later done is kept as a
// contradiction, and the pages and the API show it.
func TestCancelled(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		alice := "alice:" + alicePassword
		s.claim(t, claimBody("shop", "c1", "40"))
		_, page := s.page(t, "GET", "/events/shop/c1", alice, nil)
		form := formOf(t, page)
		form.Set("to", "cancelled")
		form.Set("note", "a test order")
		form.Set("confirm", "yes")
		if resp, body := s.page(t, "POST", "/events/shop/c1", alice, form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("cancel: %d\n%s", resp.StatusCode, body)
		}
		if out := s.claim(t, claimBody("shop", "c1", "41")); out["process"] != false || out["decision"] != "cancelled" ||
			out["status"] != "cancelled" {
			t.Errorf("a redelivery of a cancelled event: %v", out)
		}
		done := outcomeBody("c1", "40", "done")
		done["crm_ref"] = "CRM-40"
		if code, out := s.outcome(t, done); code != http.StatusOK || out["changed"] != false || out["status"] != "cancelled" {
			t.Errorf("the holder's done after the cancellation: %d %v", code, out)
		}
		if n := len(linesOfKind(s.history(t, "shop", "c1"), "contradiction")); n != 1 {
			t.Errorf("%d contradiction lines, want 1", n)
		}
		if n := s.count(t, "outbox WHERE event_id = 'c1' AND alert_kind = '"+audit.AlertContradiction+"'"); n != 1 {
			t.Errorf("%d contradiction alerts, want 1", n)
		}
		if code, out := s.call(t, "GET", "/v1/events?status=cancelled", nil); code != http.StatusOK ||
			len(out["events"].([]any)) != 1 {
			t.Errorf("GET /v1/events?status=cancelled: %d %v", code, out)
		}
		if _, list := s.page(t, "GET", "/?status=cancelled", alice, nil); !strings.Contains(list, `badge status-cancelled`) {
			t.Errorf("the events page does not show the cancelled event:\n%s", list)
		}
		// A failed event may be cancelled too, from its page.
		s.claim(t, claimBody("shop", "c2", "50"))
		s.outcome(t, outcomeBody("c2", "50", "failed"))
		_, page = s.page(t, "GET", "/events/shop/c2", alice, nil)
		i := strings.Index(page, `<form class="cancel"`)
		if i < 0 {
			t.Fatalf("no cancel form on a failed event's page:\n%s", page)
		}
		v := url.Values{}
		for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`).FindAllStringSubmatch(page[i:], 5) {
			v.Set(m[1], m[2])
		}
		v.Set("note", "handled by hand")
		if resp, body := s.page(t, "POST", "/events/shop/c2", alice, v); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("cancel a failed event: %d\n%s", resp.StatusCode, body)
		}
		if out := s.claim(t, claimBody("shop", "c2", "51")); out["decision"] != "cancelled" {
			t.Errorf("a redelivery of a cancelled failed event: %v", out)
		}
	})
}
