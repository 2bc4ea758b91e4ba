package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

const stagingToken = "staging-token-0123456789"

// withStaging adds a second n8n instance, "staging", with its own token and
// editor.
func withStaging(c *handlers.Config, _ *store.Options) {
	c.Instances = []handlers.Instance{{Name: "staging", Token: stagingToken}}
	c.Links.N8NEditorURL = "https://n8n.example"
	c.Links.Instances = map[string]string{"staging": "https://n8n-staging.example"}
}

func (s *server) staging(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return s.callAs(t, "Bearer "+stagingToken, method, path, body)
}

// TestInstances: two n8n instances number their executions alike; the
// token tells them apart and their executions never meet.
func TestInstances(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		n8n := newFakeLookup()
		s := newServer(t, dialect, withStaging, withUI, withLookup(n8n))

		t.Run("the same execution id from another instance is another execution", func(t *testing.T) {
			s.claim(t, claimBody("shop", "i1", "7"))
			code, out := s.staging(t, "POST", "/v1/claims", claimBody("shop", "i1", "7"))
			if code != http.StatusOK || out["decision"] != "in_progress" || out["process"] != false ||
				out["delivery"] != "redelivery" || out["holder_execution_id"] != "7" {
				t.Fatalf("staging's 7: %d %v", code, out)
			}
			code, out = s.staging(t, "POST", "/v1/outcomes", outcomeBody("i1", "7", "done"))
			if code != http.StatusConflict || apiErr(out)["code"] != "not_holder" || apiErr(out)["holder"] != "7" {
				t.Errorf("staging's 7 reports done: %d %v", code, out)
			}
			if code, out := s.outcome(t, outcomeBody("i1", "7", "done")); code != http.StatusOK || out["changed"] != true {
				t.Errorf("the default instance's 7 reports done: %d %v", code, out)
			}
			ev := s.event(t, "shop", "i1")
			ids := map[string]bool{}
			for _, x := range ev["executions"].([]any) {
				ids[x.(map[string]any)["execution_id"].(string)] = true
			}
			if !ids["7"] || !ids["7@staging"] || len(ids) != 2 {
				t.Errorf("executions = %v, want 7 and 7@staging", ids)
			}
		})

		t.Run("errors of two instances' execution 7 are two errors", func(t *testing.T) {
			body := `{"execution":{"id":"70","mode":"webhook","error":{"message":"boom"}},"workflow":{"id":"wf1","name":"Orders"}}`
			code, prod := s.call(t, "POST", "/v1/n8n/errors", body)
			if code != http.StatusAccepted {
				t.Fatalf("default: %d %v", code, prod)
			}
			code, stg := s.staging(t, "POST", "/v1/n8n/errors", body)
			if code != http.StatusAccepted || stg["duplicate"] == true || stg["error_id"] == prod["error_id"] {
				t.Fatalf("staging's error was taken for the default instance's: %d %v", code, stg)
			}
			if stg["execution_id"] != "70@staging" {
				t.Errorf("staging's error is of execution %v", stg["execution_id"])
			}
			if code, again := s.staging(t, "POST", "/v1/n8n/errors", body); code != http.StatusOK || again["duplicate"] != true {
				t.Errorf("staging's error resent: %d %v", code, again)
			}
		})

		t.Run("lineage is asked of the instance that ran the execution", func(t *testing.T) {
			s.staging(t, "POST", "/v1/claims", claimBody("shop", "i2", "30"))
			// The default instance also has a 30 and a 32, unrelated.
			n8n.add("32", "webhook", "")
			n8n.add("30@staging", "webhook", "")
			n8n.execs["32@staging"] = audit.N8NExecution{ID: "32@staging", WorkflowID: "wf1@staging", Mode: "retry",
				RetryOf: "30@staging"}
			report := outcomeBody("i2", "32", "done")
			delete(report, "run_stamp") // a call built by hand: n8n's API tells the Retry
			code, out := s.staging(t, "POST", "/v1/outcomes", report)
			if code != http.StatusOK || out["changed"] != true {
				t.Fatalf("staging's Retry 32 of 30: %d %v", code, out)
			}
			if line := lastOfKind(s.history(t, "shop", "i2"), "outcome"); line == nil ||
				!strings.HasPrefix(line["message"].(string), "done by retry 32@staging of 30@staging") {
				t.Errorf("outcome line = %v", line)
			}
			if code, out := s.outcome(t, outcomeBody("i2", "32", "done")); code != http.StatusConflict {
				t.Errorf("the default instance's unrelated 32: %d %v", code, out)
			}
		})

		t.Run("an id holding the separator is refused, naming the field", func(t *testing.T) {
			body := claimBody("shop", "i3", "7@staging")
			code, out := s.call(t, "POST", "/v1/claims", body)
			if code != http.StatusUnprocessableEntity || apiErr(out)["fields"].(map[string]any)["execution_id"] == nil {
				t.Errorf("7@staging from the default instance: %d %v", code, out)
			}
			if code, out := s.call(t, "GET", "/v1/events/shop/i3", nil); code != http.StatusNotFound {
				t.Errorf("the refused claim wrote an event: %d %v", code, out)
			}
		})

		t.Run("another token opens nothing", func(t *testing.T) {
			if code, _ := s.callAs(t, "Bearer staging-token-wrong", "POST", "/v1/claims", claimBody("shop", "i4", "1")); code != http.StatusUnauthorized {
				t.Errorf("a wrong token: %d", code)
			}
		})

		t.Run("events filter by instance, pages link each instance's editor", func(t *testing.T) {
			s.claim(t, claimBody("shop", "only-default", "90"))
			s.staging(t, "POST", "/v1/claims", claimBody("shop", "only-staging", "90"))
			list := func(q string) map[string]bool {
				code, out := s.call(t, "GET", "/v1/events?limit=500&"+q, nil)
				if code != http.StatusOK {
					t.Fatalf("list %s: %d %v", q, code, out)
				}
				got := map[string]bool{}
				for _, e := range out["events"].([]any) {
					got[e.(map[string]any)["event_id"].(string)] = true
				}
				return got
			}
			if got := list("instance=staging"); !got["only-staging"] || got["only-default"] || !got["i1"] {
				t.Errorf("instance=staging lists %v", got)
			}
			if got := list("instance=default"); got["only-staging"] || !got["only-default"] || !got["i1"] {
				t.Errorf("instance=default lists %v", got)
			}
			if code, out := s.call(t, "GET", "/v1/events?instance=prod", nil); code != http.StatusUnprocessableEntity ||
				apiErr(out)["fields"].(map[string]any)["instance"] == nil {
				t.Errorf("an unknown instance: %d %v", code, out)
			}
			alice := "alice:" + alicePassword
			_, page := s.page(t, "GET", "/events/shop/only-staging", alice, nil)
			if !strings.Contains(page, "https://n8n-staging.example/workflow/wf1/executions/90") ||
				strings.Contains(page, "https://n8n.example/workflow/wf1/executions/90") {
				t.Errorf("the staging execution is not linked to staging's editor")
			}
			_, page = s.page(t, "GET", "/?instance=staging", alice, nil)
			if !strings.Contains(page, `<option value="staging" selected>`) || !strings.Contains(page, "only-staging") ||
				strings.Contains(page, "only-default") {
				t.Errorf("the events page filtered by instance:\n%s", page)
			}
		})
	})
}
