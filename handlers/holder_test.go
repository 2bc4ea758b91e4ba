package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// fakeLookup is n8n's API as the store sees it: what it knows of each
// execution.
type fakeLookup struct {
	mu    sync.Mutex
	execs map[string]audit.N8NExecution
	asked int
}

func newFakeLookup() *fakeLookup { return &fakeLookup{execs: map[string]audit.N8NExecution{}} }

func (f *fakeLookup) add(id, mode, retryOf string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs[id] = audit.N8NExecution{ID: id, WorkflowID: "wf1", Mode: mode, RetryOf: retryOf}
}

func (f *fakeLookup) Execution(_ context.Context, id string) (audit.N8NExecution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	x, ok := f.execs[id]
	if !ok {
		return x, audit.ErrExecutionNotFound
	}
	return x, nil
}

func withLookup(l audit.ExecutionLookup) func(*handlers.Config, *store.Options) {
	return func(_ *handlers.Config, o *store.Options) { o.Lookup = l }
}

// apiErr returns the error object of an answer.
func apiErr(out map[string]any) map[string]any {
	e, _ := out["error"].(map[string]any)
	return e
}

// history returns an event's history lines over the API.
func (s *server) history(t *testing.T, source, eventID string) []map[string]any {
	t.Helper()
	code, ev := s.call(t, "GET", "/v1/events/"+pathEscape(source)+"/"+pathEscape(eventID), nil)
	if code != http.StatusOK {
		t.Fatalf("GET event: %d %v", code, ev)
	}
	var lines []map[string]any
	for _, l := range ev["history"].([]any) {
		lines = append(lines, l.(map[string]any))
	}
	return lines
}

func (s *server) event(t *testing.T, source, eventID string) map[string]any {
	t.Helper()
	code, ev := s.call(t, "GET", "/v1/events/"+pathEscape(source)+"/"+pathEscape(eventID), nil)
	if code != http.StatusOK {
		t.Fatalf("GET event: %d %v", code, ev)
	}
	return ev
}

func outcomeBody(eventID, execution, outcome string) map[string]any {
	return map[string]any{"source": "shop", "event_id": eventID, "execution_id": execution, "outcome": outcome,
		"workflow_id": "wf1", "run_stamp": stampOf(execution)}
}

// lastOfKind returns the newest line of a kind (the API lists the newest
// first).
func lastOfKind(lines []map[string]any, kind string) map[string]any {
	for _, l := range lines {
		if l["kind"] == kind {
			return l
		}
	}
	return nil
}

// TestOneHolder reproduces each way the landed main let two executions act
// on one event, and shows the answers now.
func TestOneHolder(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)

		t.Run("a stale failed resent after a redelivery reclaimed is refused and kept as evidence", func(t *testing.T) {
			s.claim(t, claimBody("shop", "e1", "A"))
			if code, out := s.outcome(t, outcomeBody("e1", "A", "failed")); code != http.StatusOK || out["changed"] != true {
				t.Fatalf("A failed: %d %v", code, out)
			}
			if out := s.claim(t, claimBody("shop", "e1", "B")); out["decision"] != "reclaimed" || out["process"] != true {
				t.Fatalf("B = %v", out)
			}
			// A's answer was lost; Retry On Fail resends it.
			code, out := s.outcome(t, outcomeBody("e1", "A", "failed"))
			e := apiErr(out)
			if code != http.StatusConflict || e["code"] != "not_holder" || e["holder"] != "B" || e["status"] != "processing" {
				t.Fatalf("A's resend: %d %v", code, out)
			}
			if out := s.claim(t, claimBody("shop", "e1", "C")); out["process"] != false || out["decision"] != "in_progress" {
				t.Errorf("C after the refused resend = %v", out)
			}
			ev := s.event(t, "shop", "e1")
			if ev["status"] != "processing" || ev["holder_execution_id"] != "B" {
				t.Errorf("entry = %v holder %v", ev["status"], ev["holder_execution_id"])
			}
			line := lastOfKind(s.history(t, "shop", "e1"), "not_holder")
			if line == nil || line["execution_id"] != "A" ||
				!strings.Contains(line["message"].(string), "execution A reported failed but does not hold the entry") {
				t.Errorf("evidence line = %v", line)
			}
			if ev["needs_review"] == true {
				t.Error("a stray failed put the running entry into review")
			}
			// A's third resend writes no second line.
			s.outcome(t, outcomeBody("e1", "A", "failed"))
			n := 0
			for _, l := range s.history(t, "shop", "e1") {
				if l["kind"] == "not_holder" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d evidence lines for one report resent, want 1", n)
			}
		})

		t.Run("the mover's resend changes nothing, a former holder's is refused", func(t *testing.T) {
			s.claim(t, claimBody("shop", "e2", "A"))
			s.outcome(t, outcomeBody("e2", "A", "failed"))
			s.claim(t, claimBody("shop", "e2", "B"))
			if code, out := s.outcome(t, outcomeBody("e2", "B", "done")); code != http.StatusOK || out["changed"] != true {
				t.Fatalf("B done: %d %v", code, out)
			}
			if code, out := s.outcome(t, outcomeBody("e2", "B", "done")); code != http.StatusOK || out["changed"] != false {
				t.Errorf("B's resend: %d %v", code, out)
			}
			if code, out := s.outcome(t, outcomeBody("e2", "B", "failed")); code != http.StatusConflict || apiErr(out)["code"] != "conflict" {
				t.Errorf("failed after done from the holder: %d %v", code, out)
			}
			if code, out := s.outcome(t, outcomeBody("e2", "A", "failed")); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" {
				t.Errorf("the former holder's resend: %d %v", code, out)
			}
		})

		t.Run("a client retry_of is recorded but grants nothing without the n8n API", func(t *testing.T) {
			s.claim(t, claimBody("shop", "e3", "X"))
			body := claimBody("shop", "e3", "Y")
			body["retry_of"] = "X"
			out := s.claim(t, body)
			if out["process"] != false || out["decision"] != "in_progress" || out["delivery"] != "redelivery" ||
				!strings.Contains(out["lineage_note"].(string), "retry_of X not verified: configure the n8n API") {
				t.Fatalf("Y = %v", out)
			}
			if ev := s.event(t, "shop", "e3"); ev["holder_execution_id"] != "X" {
				t.Errorf("holder = %v, want X", ev["holder_execution_id"])
			}
		})

		t.Run("an Error Trigger payload's retryOf grants nothing without n8n's API", func(t *testing.T) {
			s.claim(t, claimBody("shop", "e4", "X4"))
			body := claimBody("shop", "e4", "Y4")
			body["retry_of"] = "X4"
			if out := s.claim(t, body); out["process"] != false {
				t.Fatalf("unverified = %v", out)
			}
			// A payload posted with the workflows' token says Y4 is a Retry of
			// X4: anyone holding the token can post it, and n8n's API is not
			// there to confirm it.
			code, _ := s.call(t, "POST", "/v1/n8n/errors", `{"execution":{"id":"Y4","retryOf":"X4","mode":"retry",
				"error":{"message":"boom"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`)
			if code != http.StatusAccepted {
				t.Fatalf("error intake: %d", code)
			}
			if out := s.claim(t, body); out["decision"] != "in_progress" || out["process"] != false {
				t.Errorf("after the payload's lineage = %v", out)
			}
			if code, out := s.outcome(t, outcomeBody("e4", "Y4", "done")); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" {
				t.Errorf("Y4's done moved the entry: %d %v", code, out)
			}
		})

		t.Run("the same execution id from another workflow is never held", func(t *testing.T) {
			s.claim(t, claimBody("shop", "e5", "30"))
			other := claimBody("shop", "e5", "30")
			other["workflow_id"] = "wf-staging"
			delete(other, "run_stamp") // a call built by hand: nothing tells it apart from 30 but its workflow
			deliveries := s.event(t, "shop", "e5")["deliveries"]
			code, out := s.call(t, "POST", "/v1/claims", other)
			if code != http.StatusConflict || !strings.Contains(apiErr(out)["message"].(string), "not the execution 30 the service knows") {
				t.Errorf("the impostor: %d %v", code, out)
			}
			if ev := s.event(t, "shop", "e5"); ev["deliveries"] != deliveries || ev["holder_execution_id"] != "30" {
				t.Errorf("the refused claim changed the entry: %v", ev)
			}
			if code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": "e5", "execution_id": "30",
				"workflow_id": "wf-staging", "outcome": "failed"}); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" {
				t.Errorf("the impostor's outcome: %d %v", code, out)
			}
			// With a run stamp of its own (a second n8n's execution 30), it
			// is another execution: kept apart, granted nothing.
			other["run_stamp"] = "30:1764925299999:staging"
			if code, out := s.call(t, "POST", "/v1/claims", other); code != http.StatusOK || out["process"] != false ||
				out["decision"] != "in_progress" {
				t.Errorf("the impostor with its own stamp: %d %v", code, out)
			}
			other["outcome"] = "failed"
			delete(other, "node")
			if code, out := s.outcome(t, other); code != http.StatusConflict || apiErr(out)["code"] != "not_holder" {
				t.Errorf("the stamped impostor's outcome: %d %v", code, out)
			}
			if out := s.claim(t, claimBody("shop", "e5", "30")); out["decision"] != "held" {
				t.Errorf("the real 30's resend = %v", out)
			}
		})

		t.Run("an error of an execution told in_progress leaves the holder's entry alone", func(t *testing.T) {
			s.claim(t, claimBody("shop", "e6", "H6"))
			if out := s.claim(t, claimBody("shop", "e6", "N6")); out["decision"] != "in_progress" {
				t.Fatalf("N6 = %v", out)
			}
			alerts := s.count(t, "outbox")
			code, _ := s.call(t, "POST", "/v1/n8n/errors", `{"execution":{"id":"N6","mode":"webhook",
				"error":{"message":"Already registered node failed"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`)
			if code != http.StatusAccepted {
				t.Fatalf("error intake: %d", code)
			}
			ev := s.event(t, "shop", "e6")
			if ev["needs_review"] == true || ev["review_reason"] != nil {
				t.Errorf("the entry went to review: %v", ev["review_reason"])
			}
			if n := s.count(t, "outbox"); n != alerts {
				t.Errorf("%d alerts written for a non-acting execution's error", n-alerts)
			}
			line := lastOfKind(s.history(t, "shop", "e6"), "error")
			if line == nil || !strings.Contains(line["message"].(string), "which was told in progress and did nothing") {
				t.Errorf("error line = %v", line)
			}
			// The holder's own error still goes to review.
			s.call(t, "POST", "/v1/n8n/errors", `{"execution":{"id":"H6","mode":"webhook",
				"error":{"message":"CRM timeout"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`)
			if ev := s.event(t, "shop", "e6"); ev["review_reason"] != "error" {
				t.Errorf("the holder's error: review_reason = %v", ev["review_reason"])
			}
		})

		t.Run("an outcome needs the execution that reports it", func(t *testing.T) {
			s.claim(t, claimBody("shop", "e7", "7"))
			code, out := s.outcome(t, map[string]any{"source": "shop", "event_id": "e7", "outcome": "done"})
			if code != http.StatusUnprocessableEntity || apiErr(out)["fields"].(map[string]any)["execution_id"] == nil {
				t.Errorf("no execution_id: %d %v", code, out)
			}
		})
	})
}

// TestRetryOutcome: n8n's Retry resumes at the failed node, so the outcome
// is the only place a Retry shows itself.
func TestRetryOutcome(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		t.Run("with the n8n API a Retry of the holder moves the entry", func(t *testing.T) {
			n8n := newFakeLookup()
			s := newServer(t, dialect, withLookup(n8n))
			s.claim(t, claimBody("shop", "r1", "30"))
			s.call(t, "POST", "/v1/n8n/errors", `{"execution":{"id":"30","mode":"webhook",
				"error":{"message":"CRM outcome unknown"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`)
			n8n.add("30", "webhook", "")
			n8n.add("32", "retry", "30")
			body := outcomeBody("r1", "32", "done")
			body["crm_ref"] = "CRM-1"
			delete(body, "run_stamp") // a call built by hand: n8n's API tells the Retry
			code, out := s.outcome(t, body)
			if code != http.StatusOK || out["changed"] != true || out["status"] != "done" {
				t.Fatalf("the retry's done: %d %v", code, out)
			}
			line := lastOfKind(s.history(t, "shop", "r1"), "outcome")
			if line == nil || !strings.HasPrefix(line["message"].(string), "done by retry 32 of 30") || line["retry_of"] != "30" {
				t.Errorf("outcome line = %v", line)
			}
			ev := s.event(t, "shop", "r1")
			if ev["holder_execution_id"] != "32" || ev["crm_ref"] != "CRM-1" {
				t.Errorf("entry = holder %v crm_ref %v", ev["holder_execution_id"], ev["crm_ref"])
			}
			// The original's late resend is refused now.
			if code, out := s.outcome(t, outcomeBody("r1", "30", "failed")); code != http.StatusConflict ||
				apiErr(out)["code"] != "not_holder" {
				t.Errorf("the original after its retry: %d %v", code, out)
			}
		})

		t.Run("a Retry of a Retry of a failed holder captures the failed entry", func(t *testing.T) {
			n8n := newFakeLookup()
			s := newServer(t, dialect, withLookup(n8n))
			s.claim(t, claimBody("shop", "r2", "40"))
			s.outcome(t, outcomeBody("r2", "40", "failed"))
			n8n.add("41", "retry", "40")
			n8n.add("42", "retry", "41")
			report := outcomeBody("r2", "42", "unknown")
			delete(report, "run_stamp") // a call built by hand: n8n's API tells the Retry
			code, out := s.outcome(t, report)
			if code != http.StatusOK || out["status"] != "processing" || out["needs_review"] != true {
				t.Fatalf("the retry's unknown: %d %v", code, out)
			}
			if msg := lastOfKind(s.history(t, "shop", "r2"), "outcome")["message"].(string); !strings.HasPrefix(msg, "unknown by retry 42 of 41 ← 40") {
				t.Errorf("message = %q", msg)
			}
			if out := s.claim(t, claimBody("shop", "r2", "43")); out["process"] != false {
				t.Errorf("a redelivery after the retry's unknown = %v", out)
			}
		})

		t.Run("a retry n8n does not confirm is refused", func(t *testing.T) {
			n8n := newFakeLookup()
			s := newServer(t, dialect, withLookup(n8n))
			s.claim(t, claimBody("shop", "r3", "50"))
			n8n.add("51", "webhook", "")
			if code, out := s.outcome(t, outcomeBody("r3", "51", "done")); code != http.StatusConflict || apiErr(out)["holder"] != "50" {
				t.Errorf("a webhook execution's done: %d %v", code, out)
			}
		})

		t.Run("without the n8n API the retry's done is evidence for a person", func(t *testing.T) {
			s := newServer(t, dialect, withUI)
			s.claim(t, claimBody("shop", "r4", "60"))
			body := outcomeBody("r4", "62", "done")
			body["crm_ref"] = "CRM-62"
			code, out := s.outcome(t, body)
			if code != http.StatusConflict || apiErr(out)["code"] != "not_holder" || apiErr(out)["holder"] != "60" {
				t.Fatalf("62's done: %d %v", code, out)
			}
			ev := s.event(t, "shop", "r4")
			if ev["status"] != "processing" || ev["review_reason"] != "not_holder" || ev["needs_review"] != true {
				t.Errorf("entry = %v %v %v", ev["status"], ev["review_reason"], ev["needs_review"])
			}
			alice := "alice:" + alicePassword
			_, page := s.page(t, "GET", "/events/shop/r4", alice, nil)
			if !strings.Contains(page, "execution 62 reported done (CRM-62) but does not hold the entry") ||
				!strings.Contains(page, "Confirm: mark done (CRM-62)") {
				t.Fatalf("the audit row shows no evidence to confirm:\n%s", page)
			}
			form := url.Values{"csrf": {csrfOf(t, page)}, "to": {"done"}, "crm_ref": {"CRM-62"}, "holder": {"60"},
				"note": {"Confirmed the report of execution 62"}, "confirm": {"yes"}}
			if resp, body := s.page(t, "POST", "/events/shop/r4", alice, form); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("confirm: %d\n%s", resp.StatusCode, body)
			}
			ev = s.event(t, "shop", "r4")
			if ev["status"] != "done" || ev["crm_ref"] != "CRM-62" {
				t.Errorf("after the confirmation: %v %v", ev["status"], ev["crm_ref"])
			}
		})
	})
}

// TestResolveRunning: a person may resolve an entry that does not wait for
// review only after confirming that nothing runs it, and only as the page
// showed it.
func TestResolveRunning(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withUI)
		alice := "alice:" + alicePassword
		s.claim(t, claimBody("shop", "run-1", "70"))
		_, page := s.page(t, "GET", "/events/shop/run-1", alice, nil)
		if !strings.Contains(page, `name="confirm"`) || !strings.Contains(page, "may still be running the action") {
			t.Fatalf("the form of a running entry asks for no confirmation:\n%s", page)
		}
		token := csrfOf(t, page)
		form := url.Values{"csrf": {token}, "to": {"failed"}, "note": {"nothing in the CRM"}, "holder": {"70"}}
		if resp, body := s.page(t, "POST", "/events/shop/run-1", alice, form); resp.StatusCode != http.StatusUnprocessableEntity ||
			!strings.Contains(body, "confirm that no execution is still running") {
			t.Fatalf("without the confirmation: %d\n%s", resp.StatusCode, body)
		}
		if ev := s.event(t, "shop", "run-1"); ev["status"] != "processing" {
			t.Fatalf("the refused form moved the entry to %v", ev["status"])
		}
		// Another execution took the entry over since the page was loaded.
		stale := url.Values{"csrf": {token}, "to": {"failed"}, "note": {"x"}, "holder": {"69"}, "confirm": {"yes"}}
		if resp, body := s.page(t, "POST", "/events/shop/run-1", alice, stale); resp.StatusCode != http.StatusConflict ||
			!strings.Contains(body, "execution 70 holds the entry now") {
			t.Errorf("a stale holder: %d\n%s", resp.StatusCode, body)
		}
		form.Set("confirm", "yes")
		form.Set("to", "done")
		form.Set("crm_ref", "CRM-70")
		if resp, body := s.page(t, "POST", "/events/shop/run-1", alice, form); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("confirmed: %d\n%s", resp.StatusCode, body)
		}
		ev := s.event(t, "shop", "run-1")
		if ev["status"] != "done" || ev["crm_ref"] != "CRM-70" {
			t.Errorf("after the resolution: %v %v", ev["status"], ev["crm_ref"])
		}
		if line := lastOfKind(s.history(t, "shop", "run-1"), "resolution"); line == nil || line["crm_ref"] != "CRM-70" {
			t.Errorf("resolution line = %v", line)
		}
		_, page = s.page(t, "GET", "/events/shop/run-1", alice, nil)
		if !strings.Contains(page, "https://crm.example.com/o?id=run-1") {
			t.Errorf("no CRM link after the resolution")
		}
	})
}
