//go:build n8n

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hookTimeout is the hooks' call timeout in these tests
// (RETRYAUDIT_HOOK_TIMEOUT): long, so that a hook that waited on the
// network would make every execution at least this slow.
const hookTimeout = 30 * time.Second

// alertFast is how soon after a failed execution's end its alert must be in
// Slack when the hooks report it (reconciliation alone: 45-60 s).
const alertFast = 10 * time.Second

// step is one step of a control run.
type step struct {
	name string
	fn   func(*testing.T)
}

// hooksEnv is what n8n's environment gains to load the hooks file: every
// n8n process of the suite reports to the tap.
func hooksEnv(t *testing.T, tap *hookTap, token string) []string {
	t.Helper()
	file, err := filepath.Abs(filepath.Join("..", "n8n", "retryaudit-hooks.js"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"EXTERNAL_HOOK_FILES=" + file, "RETRYAUDIT_URL=" + tap.URL, "RETRYAUDIT_HOOK_TOKEN=" + token,
		fmt.Sprintf("RETRYAUDIT_HOOK_TIMEOUT=%d", int(hookTimeout.Seconds()))}
}

// wireHooks imports the two workflows the hook steps run, which do not call
// the service: one that succeeds and one that fails.
func (s *suite) wireHooks(t *testing.T) {
	t.Helper()
	s.plain = s.n8n.importWorkflow(t, webhookWorkflow(t, "Plain", "plain", 1, "return [{ json: { ok: true } }];"))
	s.fails = s.n8n.importWorkflow(t, webhookWorkflow(t, "Fails", "fails", 2, "throw new Error('the Fails workflow fails');"))
	s.n8n.setErrorWorkflow(t, s.fails.ID, s.errors.ID)
	for _, w := range []workflow{s.plain, s.fails} {
		s.n8n.publish(t, w.ID)
	}
	if !strings.Contains(s.n8n.log.String(), "retryaudit hooks: reporting execution starts and ends") {
		t.Fatalf("n8n did not load the hooks file; it printed:\n%s", s.n8n.log.tail(40))
	}
}

// webhookWorkflow is a webhook that answers with what its Code node
// returns; n tells its node ids apart from other workflows'.
func webhookWorkflow(t *testing.T, name, path string, n int, code string) []byte {
	t.Helper()
	id := func(k int) string { return fmt.Sprintf("5e7a0000-0000-4000-8000-%012x", 0xb000+n*16+k) }
	b, err := json.Marshal(map[string]any{
		"name": name,
		"nodes": []any{
			map[string]any{"id": id(1), "name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
				"position": []int{0, 0}, "webhookId": id(2),
				"parameters": map[string]any{"httpMethod": "POST", "path": path, "responseMode": "lastNode", "options": map[string]any{}}},
			map[string]any{"id": id(3), "name": "Code", "type": "n8n-nodes-base.code", "typeVersion": 2,
				"position": []int{200, 0}, "parameters": map[string]any{"jsCode": code}},
		},
		"connections": map[string]any{"Webhook": map[string]any{"main": []any{[]any{
			map[string]any{"node": "Code", "type": "main", "index": 0}}}}},
		"settings": map[string]any{"executionOrder": "v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hookSteps are the control run's steps about the hooks, after the others.
func (r *run) hookSteps() []step {
	since := time.Now()
	r.tap.reset()
	steps := []step{
		{"every execution so far reached the service through the hooks", func(t *testing.T) {
			throughHooks(t, r.n8n, r.tap, since, 2*time.Minute)
		}},
		{"the error workflow unpublished: the hooks' report is alerted within 10 s", r.alertedFast},
		{"the service hangs, then is stopped: n8n's executions finish as fast", r.serviceAway},
	}
	if r.backend == "sqlite" { // once is enough: it is about n8n, and restarting n8n takes a while
		steps = append(steps, step{"n8n restarted while the service is unreachable: reconciliation finds the failure",
			r.restartUnreachable})
	}
	return append(steps, step{"a restored n8n: its execution ids start again", r.restoredN8N})
}

// n8nRun reads an execution with its times.
func (r *run) n8nRun(t *testing.T, id string) n8nExecution {
	t.Helper()
	var x n8nExecution
	r.n8n.api(t, "GET", "/executions/"+id, nil, http.StatusOK, &x)
	return x
}

func (r *run) alertedFast(t *testing.T) {
	id := r.newID()
	r.n8n.unpublish(t, r.errors.ID)
	r.crm.setMode(crm500)
	status, out := r.deliver(t, "orders", id)
	r.crm.setMode(crmNormal)
	r.n8n.publish(t, r.errors.ID)
	if status != http.StatusInternalServerError {
		t.Fatalf("the sender was answered %d %v", status, out)
	}
	holder := r.ledger(t, "shop", id).HolderExecutionID
	x := r.n8n.waitExecution(t, holder)
	if x.Status != "error" {
		t.Fatalf("execution %s is %s", holder, x.Status)
	}
	m := r.alert(t, "shop", id)
	ended := r.n8nRun(t, holder).StoppedAt
	if took := m.At.Sub(ended); took > alertFast {
		t.Errorf("the alert came %s after the execution ended, want within %s", took.Round(time.Millisecond), alertFast)
	} else {
		t.Logf("the alert came %s after the execution ended", took.Round(time.Millisecond))
	}
	found := false
	for _, er := range r.ledger(t, "shop", id).Errors {
		if er.ExecutionID == holder {
			found = true
			if er.Kind != "found_by_hook" || !strings.Contains(er.Message, "CRM outcome unknown for shop/"+id) {
				t.Errorf("recorded as %s: %q", er.Kind, er.Message)
			}
		}
	}
	if !found {
		t.Errorf("execution %s's failure is not on the event", holder)
	}
}

// plainRuns runs the Plain workflow n times, one after another, and checks
// that each finishes well within the hooks' timeout.
func (r *run) plainRuns(t *testing.T, n int, why string) {
	t.Helper()
	for i := range n {
		began := time.Now()
		status, raw := do(t, &http.Client{Timeout: 3 * hookTimeout}, "POST", r.n8n.URL+"/webhook/plain", nil, map[string]any{"i": i})
		took := time.Since(began)
		if status != http.StatusOK || !strings.Contains(string(raw), `"ok":true`) {
			t.Fatalf("%s: the Plain workflow was answered %d %s; %s", why, status, raw, r.n8n.lastRun(t, r.plain.ID))
		}
		if took >= hookTimeout/2 {
			t.Errorf("%s: a run of the Plain workflow took %s: did a hook wait for the service (timeout %s)?",
				why, took.Round(time.Millisecond), hookTimeout)
		}
	}
}

func (r *run) serviceAway(t *testing.T) {
	since := time.Now()
	r.tap.set("hang")
	r.plainRuns(t, 5, "the service hangs")
	r.tap.set("")

	r.svc.stop(t)
	r.plainRuns(t, 5, "the service is stopped")
	r.svc = r.svc.restart(t, r.t)

	// The hooks kept the reports and deliver them now.
	throughHooks(t, r.n8n, r.tap, since, 2*time.Minute)
}

func (r *run) restartUnreachable(t *testing.T) {
	r.tap.reset() // a restore before may have reused the ids it saw
	r.svc.stop(t)
	status, raw := do(t, http.DefaultClient, "POST", r.n8n.URL+"/webhook/fails", nil, map[string]any{"r": r.prefix})
	if status != http.StatusInternalServerError {
		t.Fatalf("the Fails workflow was answered %d %s", status, raw)
	}
	var page struct {
		Data []n8nExecution `json:"data"`
	}
	r.n8n.api(t, "GET", "/executions?limit=1&workflowId="+r.fails.ID, nil, http.StatusOK, &page)
	if len(page.Data) != 1 || page.Data[0].Status != "error" {
		t.Fatalf("n8n lists %+v", page.Data)
	}
	failed := page.Data[0].ID
	if got := r.tap.execution(failed); len(got.Ends) != 0 {
		t.Fatalf("the failure of %s reached the stopped service", failed)
	}

	r.n8n.stop(t)
	r.n8n.start(t)
	r.svc = r.svc.restart(t, r.t)

	eventually(t, reconcileWithin, "reconciliation finding execution "+failed, func() string {
		status, body := r.svc.page(t, "/errors?kind=found_by_reconcile")
		if status != http.StatusOK || !strings.Contains(body, ">"+failed+"</a>") {
			return fmt.Sprintf("%d, execution %s not listed", status, failed)
		}
		return ""
	})
}
