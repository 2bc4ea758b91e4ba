package handlers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// payload reads a body captured from n8n 2.41.1 (testdata/payloads).
func payload(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "payloads", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hookClaim turns what the lab workflow's hook node sent about itself into
// the claim a real workflow makes at that point.
func hookClaim(t *testing.T, name string) map[string]any {
	t.Helper()
	var hook map[string]any
	if err := json.Unmarshal(payload(t, name), &hook); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"source": hook["source"], "event_id": hook["event_id"], "execution_id": hook["execution_id"],
		"workflow_id": hook["workflow_id"], "workflow_name": hook["workflow_name"], "node": "Claim event"}
}

func linked(out map[string]any) string {
	ev, _ := out["linked_event"].(map[string]any)
	if ev == nil {
		return ""
	}
	return ev["source"].(string) + "/" + ev["event_id"].(string)
}

// TestErrorIntakeLab replays the lab session of ../shared/n8n/payloads in its
// order: claims from the hook node, then what the error workflow posted.
func TestErrorIntakeLab(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)
		steps := []struct {
			hook, error         string
			kind, exec, retryOf string
			event               string
			claimDecision       string
		}{
			{hook: "hook-01-first-delivery.json", error: "error-01-first-delivery.json", kind: "execution_error",
				exec: "2", event: "n8n/evt-lab-0001", claimDecision: "claimed"},
			{hook: "hook-02-redelivery-same-body.json", error: "error-02-redelivery-same-body.json",
				kind: "execution_error", exec: "4", event: "n8n/evt-lab-0001", claimDecision: "in_progress"},
			{error: "error-03-retry-original-rest.json", kind: "execution_error", exec: "6", retryOf: "2",
				event: "n8n/evt-lab-0001"},
			{error: "error-04-retry-current-rest.json", kind: "execution_error", exec: "8", retryOf: "2",
				event: "n8n/evt-lab-0001"},
			{error: "error-05-retry-of-retry-public.json", kind: "execution_error", exec: "10", retryOf: "6",
				event: "n8n/evt-lab-0001"},
			{error: "error-06-after-draft-edit-retry-original-public.json", kind: "execution_error", exec: "12",
				retryOf: "4", event: "n8n/evt-lab-0001"},
			{hook: "hook-08-new-delivery-after-draft-edit.json", error: "error-08-new-delivery-after-draft-edit.json",
				kind: "execution_error", exec: "15", event: "n8n/evt-lab-0001", claimDecision: "in_progress"},
			{hook: "hook-09-code-node-throw.json", error: "error-09-code-node-throw.json", kind: "execution_error",
				exec: "17", event: "n8n/evt-lab-code-1", claimDecision: "claimed"},
			{error: "error-10-trigger-poll-error.json", kind: "trigger_error"},
		}
		for _, st := range steps {
			t.Run(st.error, func(t *testing.T) {
				if st.hook != "" {
					if out := s.claim(t, hookClaim(t, st.hook)); out["decision"] != st.claimDecision {
						t.Errorf("claim decision = %v, want %s", out["decision"], st.claimDecision)
					}
				}
				code, out := s.call(t, "POST", "/v1/n8n/errors", payload(t, st.error))
				if code != http.StatusAccepted {
					t.Fatalf("status %d: %v", code, out)
				}
				if out["recorded"] != true || out["kind"] != st.kind || out["duplicate"] != false {
					t.Errorf("answer = %v", out)
				}
				if got, _ := out["execution_id"].(string); got != st.exec {
					t.Errorf("execution_id = %v, want %q", out["execution_id"], st.exec)
				}
				if got, _ := out["retry_of"].(string); got != st.retryOf {
					t.Errorf("retry_of = %v, want %q", out["retry_of"], st.retryOf)
				}
				if got := linked(out); got != st.event {
					t.Errorf("linked_event = %q, want %q", got, st.event)
				}
			})
		}

		t.Run("the same error posted twice is one record", func(t *testing.T) {
			code, out := s.call(t, "POST", "/v1/n8n/errors", payload(t, "error-01-first-delivery.json"))
			if code != http.StatusOK || out["duplicate"] != true || linked(out) != "n8n/evt-lab-0001" {
				t.Errorf("again: %d %v", code, out)
			}
			if n := s.count(t, "n8n_errors"); n != len(steps) {
				t.Errorf("%d error records, want %d", n, len(steps))
			}
		})

		t.Run("the event's history holds every error with its node, and stays processing for review", func(t *testing.T) {
			code, ev := s.call(t, "GET", "/v1/events/n8n/evt-lab-0001", nil)
			if code != http.StatusOK {
				t.Fatalf("read: %d", code)
			}
			if ev["status"] != "processing" || ev["needs_review"] != true || ev["review_reason"] != "error" {
				t.Errorf("status %v, needs_review %v, reason %v", ev["status"], ev["needs_review"], ev["review_reason"])
			}
			errs := 0
			for _, l := range ev["history"].([]any) {
				line := l.(map[string]any)
				if line["kind"] == "error" {
					errs++
					if line["node"] != "Fail Step" || line["message"] == "" {
						t.Errorf("error line = %v", line)
					}
				}
			}
			if errs != 7 {
				t.Errorf("%d error lines, want 7", errs)
			}
			execs := map[string]string{}
			for _, x := range ev["executions"].([]any) {
				m := x.(map[string]any)
				execs[m["execution_id"].(string)] = m["root_execution_id"].(string)
			}
			for exec, root := range map[string]string{"2": "2", "4": "4", "6": "2", "8": "2", "10": "2", "12": "4", "15": "15"} {
				if execs[exec] != root {
					t.Errorf("execution %s has root %q, want %q (all: %v)", exec, execs[exec], root, execs)
				}
			}
		})

		t.Run("credentials in the stored payload are redacted", func(t *testing.T) {
			body := strings.Replace(string(payload(t, "error-01-first-delivery.json")),
				`"x-lab-source": "n8n-fail-step",`, `"x-lab-source": "n8n-fail-step", "authorization": "Bearer sk-live-secret-123456",`, 1)
			body = strings.Replace(body, `"id": "2",`, `"id": "902",`, 1)
			code, out := s.call(t, "POST", "/v1/n8n/errors", body)
			if code != http.StatusAccepted {
				t.Fatalf("%d %v", code, out)
			}
			var stored string
			if err := s.store.DB().Get(&stored, s.store.DB().Rebind(`SELECT payload FROM n8n_errors WHERE execution_id = ?`), "902"); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(stored, "sk-live-secret") || !strings.Contains(stored, "[redacted]") {
				t.Errorf("stored payload keeps the credential:\n%s", stored)
			}
			if !strings.Contains(stored, "evt-lab-0001") {
				t.Error("the request body (with the event id) was not kept")
			}
		})
	})
}

// TestErrorIntakeShapes covers what the intake accepts and what it refuses.
func TestErrorIntakeShapes(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)
		accepted := []struct {
			name, body, kind, message string
		}{
			{"the editor's test payload", `{"execution":{"id":231,"url":"http://localhost:5678/execution/231",
				"retryOf":"34","error":{"message":"Example Error Message","stack":"Stacktrace"},
				"lastNodeExecuted":"Node With Error","mode":"manual"},"workflow":{"id":"1","name":"Example Workflow"}}`,
				"test_payload", "Example Error Message"},
			{"a trigger error with the message beside the item", `{"trigger":{"error":{"name":"NodeOperationError"},
				"mode":"trigger"},"workflow":{"id":"w1","name":"Poller"},"message":"getaddrinfo ENOTFOUND feed"}`,
				"trigger_error", "getaddrinfo ENOTFOUND feed"},
			{"a shape n8n may add", `{"workflow":{"id":"w1","name":"x"},"quota":{"limit":5}}`, "unknown_shape", "quota"},
			{"an empty object", `{}`, "unknown_shape", "unknown shape"},
			{"an execution without id", `{"execution":{"mode":"webhook"},"workflow":{"id":"w"}}`, "unknown_shape", ""},
			{"nulls and numbers for ids", `{"execution":{"id":5001,"retryOf":null,"url":null,"error":{"message":"boom"},
				"mode":"webhook"},"workflow":{"id":7,"name":null}}`, "execution_error", "boom"},
		}
		for _, tc := range accepted {
			t.Run(tc.name, func(t *testing.T) {
				code, out := s.call(t, "POST", "/v1/n8n/errors", tc.body)
				if code != http.StatusAccepted || out["kind"] != tc.kind || out["linked_event"] != nil {
					t.Fatalf("%d %v", code, out)
				}
				var msg string
				id := int64(out["error_id"].(float64))
				if err := s.store.DB().Get(&msg, s.store.DB().Rebind(`SELECT message FROM n8n_errors WHERE id = ?`), id); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(msg, tc.message) {
					t.Errorf("message = %q, want it to contain %q", msg, tc.message)
				}
			})
		}
		t.Run("the editor's test payload raises no alert", func(t *testing.T) {
			var n int
			s.store.DB().Get(&n, `SELECT count(*) FROM outbox WHERE payload LIKE '%Example Error Message%'`)
			if n != 0 {
				t.Errorf("%d alerts about the test payload", n)
			}
		})
		refused := []struct{ name, body string }{
			{"not JSON", `execution failed`},
			{"an array", `[{"execution":{}}]`},
			{"a string", `"boom"`},
			{"truncated JSON", `{"execution":{"id":"1"`},
		}
		before := s.count(t, "n8n_errors")
		for _, tc := range refused {
			t.Run(tc.name, func(t *testing.T) {
				code, out := s.call(t, "POST", "/v1/n8n/errors", tc.body)
				if e, _ := out["error"].(map[string]any); code != http.StatusBadRequest || e["code"] != "invalid_json" {
					t.Errorf("%d %v", code, out)
				}
			})
		}
		if after := s.count(t, "n8n_errors"); after != before {
			t.Errorf("refused bodies wrote %d records", after-before)
		}
		if code, _ := s.callAs(t, "", "POST", "/v1/n8n/errors", `{}`); code != http.StatusUnauthorized {
			t.Errorf("without a token: %d", code)
		}
	})
}

// TestErrorBeforeClaim: an error may reach the service before the claim it
// belongs to; it is linked when the claim arrives.
func TestErrorBeforeClaim(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect)
		// A retry chain of three executions: 21 claims, 22 retries 21, 23 retries 22.
		errs := []string{
			`{"execution":{"id":"23","retryOf":"22","mode":"retry","lastNodeExecuted":"Create CRM order",
				"error":{"message":"timeout"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`,
			`{"execution":{"id":"22","retryOf":"21","mode":"retry","lastNodeExecuted":"Create CRM order",
				"error":{"message":"timeout"}},"workflow":{"id":"wf1","name":"Orders to CRM"}}`,
		}
		for _, body := range errs {
			code, out := s.call(t, "POST", "/v1/n8n/errors", body)
			if code != http.StatusAccepted || out["linked_event"] != nil {
				t.Fatalf("before the claim: %d %v", code, out)
			}
		}
		s.claim(t, claimBody("shop", "order-77", "21"))
		code, out := s.call(t, "POST", "/v1/n8n/errors", `{"execution":{"id":"21","mode":"webhook",
			"lastNodeExecuted":"Create CRM order","error":{"message":"timeout"}},"workflow":{"id":"wf1"}}`)
		if code != http.StatusAccepted || linked(out) != "shop/order-77" {
			t.Fatalf("after the claim: %d %v", code, out)
		}
		_, ev := s.call(t, "GET", "/v1/events/shop/order-77", nil)
		var lines []string
		for _, l := range ev["history"].([]any) {
			m := l.(map[string]any)
			lines = append(lines, m["kind"].(string)+":"+m["execution_id"].(string))
		}
		want := "error:21 error:22 error:23 claim:21" // newest first
		if strings.Join(lines, " ") != want {
			t.Errorf("history = %v, want %s", lines, want)
		}
		var skipped int
		s.store.DB().Get(&skipped, `SELECT count(*) FROM outbox WHERE thread_key LIKE 'error:%' AND state = 'skipped'`)
		if skipped != 2 {
			t.Errorf("%d unlinked alerts cancelled, want 2", skipped)
		}
	})
}
