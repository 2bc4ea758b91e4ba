package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

const (
	testHookToken    = "hook-token-0123456789"
	stagingHookToken = "staging-hook-token-0123456789"
)

func withHookToken(c *handlers.Config, _ *store.Options) { c.HookToken = testHookToken }

func (s *server) hooks(t *testing.T, body any) (int, map[string]any) {
	t.Helper()
	return s.callAs(t, "Bearer "+testHookToken, "POST", "/v1/n8n/executions", body)
}

func hookEnd(execution any, status string) map[string]any {
	r := map[string]any{"phase": "end", "execution_id": execution, "workflow_id": "wf1",
		"workflow_name": "Orders to CRM", "mode": "webhook", "started_at": "2026-03-01T10:00:00.120Z",
		"stopped_at": "2026-03-01T10:00:02Z", "status": status, "last_node": "Create CRM order"}
	if status == "error" {
		r["error"] = map[string]any{"message": "CRM answered 500 for shop/h1", "node": "Create CRM order", "http_code": 500}
	}
	return r
}

func reports(r ...map[string]any) map[string]any { return map[string]any{"reports": r} }

func results(t *testing.T, out map[string]any) []map[string]any {
	t.Helper()
	rs, _ := out["results"].([]any)
	var m []map[string]any
	for _, r := range rs {
		m = append(m, r.(map[string]any))
	}
	return m
}

// TestHookIntake: POST /v1/n8n/executions records what n8n's execution
// hooks report, with their own token.
func TestHookIntake(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withHookToken)

		t.Run("a failed end is recorded, linked to the event its execution claimed, and alerted", func(t *testing.T) {
			s.claim(t, claimBody("shop", "h1", "31"))
			code, out := s.hooks(t, reports(
				map[string]any{"phase": "start", "execution_id": "31", "workflow_id": "wf1", "workflow_name": "Orders to CRM",
					"mode": "webhook", "started_at": "2026-03-01T10:00:00.120Z"},
				hookEnd("31", "error")))
			rs := results(t, out)
			if code != http.StatusAccepted || len(rs) != 2 {
				t.Fatalf("answer %d %v", code, out)
			}
			if rs[1]["error_id"] == nil || rs[1]["event_url"] == "" || linked(rs[1]) != "shop/h1" {
				t.Errorf("the failed end's result is %v, want an error linked to shop/h1", rs[1])
			}
			ev := s.event(t, "shop", "h1")
			errs, _ := ev["errors"].([]any)
			if len(errs) != 1 || errs[0].(map[string]any)["kind"] != audit.N8NErrorHook ||
				!strings.Contains(fmt.Sprint(errs[0].(map[string]any)["message"]), "CRM answered 500") {
				t.Errorf("the event's errors are %v, want one found_by_hook", errs)
			}
			if ev["needs_review"] != true {
				t.Errorf("the entry does not wait for review after its holder failed")
			}
			var alerts int
			s.store.DB().Get(&alerts, `SELECT count(*) FROM outbox WHERE kind = 'alert' AND payload LIKE '%h1%'`)
			if alerts == 0 {
				t.Error("no alert about the failure")
			}
			c, ok, err := s.store.LastHookCall(context.Background(), audit.DefaultInstance)
			if err != nil || !ok || c.Reports != 2 || c.ExecutionID != "31" || c.Phase != "end" || c.Status != "error" {
				t.Errorf("the last hook call is %+v (%v, %v)", c, ok, err)
			}

			code, out = s.hooks(t, reports(hookEnd("31", "error")))
			if rs := results(t, out); code != http.StatusAccepted || len(rs) != 1 || rs[0]["duplicate"] != true {
				t.Errorf("the same end again: %d %v, want a duplicate", code, out)
			}
		})

		t.Run("ids and the HTTP code may be numbers", func(t *testing.T) {
			r := hookEnd(32, "error")
			r["workflow_id"], r["retry_of"] = 7, 31
			code, out := s.hooks(t, reports(r))
			if rs := results(t, out); code != http.StatusAccepted || len(rs) != 1 || rs[0]["execution_id"] != "32" {
				t.Fatalf("answer %d %v", code, out)
			}
			var httpCode, workflow, retryOf string
			s.store.DB().QueryRow(`SELECT http_code, workflow_id, retry_of FROM n8n_errors WHERE execution_id = '32'`).
				Scan(&httpCode, &workflow, &retryOf)
			if httpCode != "500" || workflow != "7" || retryOf != "31" {
				t.Errorf("recorded http_code %q, workflow %q, retry_of %q", httpCode, workflow, retryOf)
			}
		})

		t.Run("a success is recorded as an execution, with no error", func(t *testing.T) {
			errors := s.count(t, "n8n_errors")
			code, out := s.hooks(t, reports(hookEnd("33", "success")))
			if rs := results(t, out); code != http.StatusAccepted || len(rs) != 1 || rs[0]["error_id"] != nil {
				t.Fatalf("answer %d %v", code, out)
			}
			var mode string
			s.store.DB().Get(&mode, `SELECT mode FROM executions WHERE execution_id = '33'`)
			if mode != "webhook" || s.count(t, "n8n_errors") != errors {
				t.Errorf("execution 33 recorded with mode %q; errors %d → %d", mode, errors, s.count(t, "n8n_errors"))
			}
		})

		t.Run("every bad field is named by its report, and nothing is recorded", func(t *testing.T) {
			executions, errors := s.count(t, "executions"), s.count(t, "n8n_errors")
			bad := hookEnd("41", "error")
			bad["phase"], bad["started_at"], bad["execution_id"] = "middle", "yesterday", map[string]any{}
			backwards := hookEnd("42", "finished")
			backwards["stopped_at"] = "2026-03-01T09:00:00Z"
			backwards["error"] = "CRM down"
			number := hookEnd("43", "error")
			number["error"] = map[string]any{"message": 5}
			code, out := s.hooks(t, reports(hookEnd("40", "error"), bad, backwards, number))
			want := []string{"reports[1].phase", "reports[1].started_at", "reports[1].execution_id",
				"reports[2].stopped_at", "reports[2].status", "reports[2].error", "reports[3].error.message"}
			fields, _ := apiErr(out)["fields"].(map[string]any)
			for _, f := range want {
				if fields[f] == nil {
					t.Errorf("%s is not named: %v", f, fields)
				}
			}
			if code != http.StatusUnprocessableEntity || len(fields) != len(want) {
				t.Errorf("answer %d, fields %v", code, fields)
			}
			if s.count(t, "executions") != executions || s.count(t, "n8n_errors") != errors {
				t.Error("a refused call recorded something")
			}
		})

		t.Run("the shape of the call", func(t *testing.T) {
			many := make([]map[string]any, audit.MaxHookReports+1)
			for i := range many {
				many[i] = hookEnd(fmt.Sprint(100+i), "success")
			}
			for _, c := range []struct {
				name  string
				body  any
				code  int
				field string
			}{
				{"not JSON", "{", http.StatusBadRequest, ""},
				{"no reports", map[string]any{}, http.StatusUnprocessableEntity, "reports"},
				{"no report in the array", map[string]any{"reports": []any{}}, http.StatusUnprocessableEntity, "reports"},
				{"reports not an array", map[string]any{"reports": "all"}, http.StatusUnprocessableEntity, "reports"},
				{"a report not an object", map[string]any{"reports": []any{hookEnd("50", "success"), 7}},
					http.StatusUnprocessableEntity, "reports[1]"},
				{"more than 100 reports", reports(many...), http.StatusUnprocessableEntity, "reports"},
			} {
				code, out := s.hooks(t, c.body)
				fields, _ := apiErr(out)["fields"].(map[string]any)
				if code != c.code || (c.field != "" && fields[c.field] == nil) {
					t.Errorf("%s: %d %v, want %d naming %q", c.name, code, out, c.code, c.field)
				}
			}
		})

		t.Run("the API token does not open the hooks, nor the hook token the API", func(t *testing.T) {
			body := reports(hookEnd("60", "success"))
			code, out := s.call(t, "POST", "/v1/n8n/executions", body)
			if code != http.StatusUnauthorized || !strings.Contains(fmt.Sprint(apiErr(out)["message"]), "hook token") {
				t.Errorf("the API token on the hooks: %d %v, want 401 naming the hook token", code, out)
			}
			for _, auth := range []string{"", "Bearer wrong", "Basic " + testHookToken, "Bearer " + testHookToken + "x"} {
				if code, out := s.callAs(t, auth, "POST", "/v1/n8n/executions", body); code != http.StatusUnauthorized {
					t.Errorf("%q on the hooks: %d %v", auth, code, out)
				}
			}
			code, out = s.callAs(t, "Bearer "+testHookToken, "POST", "/v1/claims", claimBody("shop", "h60", "60"))
			if code != http.StatusUnauthorized || !strings.Contains(fmt.Sprint(apiErr(out)["message"]), "hook token") {
				t.Errorf("the hook token on /v1/claims: %d %v, want 401 naming the hook token", code, out)
			}
			for _, p := range []string{"/v1/events", "/v1/stats"} {
				if code, _ := s.callAs(t, "Bearer "+testHookToken, "GET", p, nil); code != http.StatusUnauthorized {
					t.Errorf("the hook token on %s: %d", p, code)
				}
			}
			if code, _ := s.callAs(t, "Bearer "+testHookToken, "POST", "/v1/n8n/errors",
				map[string]any{"execution": map[string]any{"id": "61"}}); code != http.StatusUnauthorized {
				t.Errorf("the hook token on /v1/n8n/errors: %d", code)
			}
			var executions int
			s.store.DB().Get(&executions, `SELECT count(*) FROM executions WHERE execution_id IN ('60', '61')`)
			if executions != 0 {
				t.Error("a refused call recorded an execution")
			}
		})
	})
}

// TestHookIntakeInstances: the hook token names the instance, and the ids
// are kept under it.
func TestHookIntakeInstances(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		s := newServer(t, dialect, withHookToken, withStaging, func(c *handlers.Config, _ *store.Options) {
			c.Instances[0].HookToken = stagingHookToken
		})
		code, out := s.callAs(t, "Bearer "+stagingHookToken, "POST", "/v1/n8n/executions", reports(hookEnd("7", "error")))
		if rs := results(t, out); code != http.StatusAccepted || len(rs) != 1 || rs[0]["execution_id"] != "7@staging" {
			t.Fatalf("staging's hook call: %d %v", code, out)
		}
		if code, out := s.hooks(t, reports(hookEnd("7", "error"))); code != http.StatusAccepted || results(t, out)[0]["duplicate"] == true {
			t.Errorf("the default instance's 7 is another execution: %d %v", code, out)
		}
		bad := hookEnd("8@prod", "success")
		code, out = s.callAs(t, "Bearer "+stagingHookToken, "POST", "/v1/n8n/executions", reports(bad))
		if fields, _ := apiErr(out)["fields"].(map[string]any); code != http.StatusUnprocessableEntity || fields["reports[0].execution_id"] == nil {
			t.Errorf("an id holding @ while several instances are configured: %d %v", code, out)
		}
		if c, ok, err := s.store.LastHookCall(context.Background(), "staging"); err != nil || !ok || c.ExecutionID != "7" {
			t.Errorf("staging's last hook call: %+v %v %v", c, ok, err)
		}
	})
}

func TestHookTokenMustDiffer(t *testing.T) {
	for name, cfg := range map[string]handlers.Config{
		"the API token":            {Token: testToken, HookToken: testToken},
		"another instance's token": {Token: testToken, HookToken: testHookToken, Instances: []handlers.Instance{{Name: "staging", Token: testHookToken}}},
		"another instance's hook token": {Token: testToken, HookToken: testHookToken,
			Instances: []handlers.Instance{{Name: "staging", Token: stagingToken, HookToken: testHookToken}}},
	} {
		cfg.Links.Instances = map[string]string{"staging": "https://n8n-staging.example"}
		if _, err := handlers.New(cfg); err == nil || !strings.Contains(err.Error(), "hook token") {
			t.Errorf("a hook token that is %s: %v", name, err)
		}
	}
}
