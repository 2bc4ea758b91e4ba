package n8n_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/n8n"
	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

const (
	serviceURL = "http://retryaudit:8080"
	token      = "the-service-token"
)

// userWorkflow is a workflow a user made: a webhook on path, some settings
// of its own.
func userWorkflow(name, path string) map[string]any {
	return map[string]any{
		"name": name,
		"nodes": []any{map[string]any{"id": "w-" + path, "name": "Webhook", "type": "n8n-nodes-base.webhook",
			"typeVersion": 2, "position": []any{0, 0}, "parameters": map[string]any{"path": path, "httpMethod": "POST"}}},
		"connections": map[string]any{},
		"settings":    map[string]any{"executionOrder": "v1", "timezone": "Europe/Berlin"},
	}
}

// plan plans the wiring and checks that planning wrote nothing.
func plan(t *testing.T, f *n8ntest.Fake, w n8n.Wiring) (*n8n.Plan, error) {
	t.Helper()
	before := len(f.Mutations())
	p, err := n8n.PlanWiring(context.Background(), n8n.NewAdmin(f.APIURL(), n8ntest.Key), w)
	if after := f.Mutations(); len(after) != before {
		t.Fatalf("planning wrote to n8n: %v", after[before:])
	}
	return p, err
}

// wire plans and applies, and waits for the publications.
func wire(t *testing.T, f *n8ntest.Fake, w n8n.Wiring) *n8n.Plan {
	t.Helper()
	p, err := plan(t, f, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Watch(context.Background(), 0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

func whats(p *n8n.Plan) string {
	var s []string
	for _, c := range p.Changes {
		s = append(s, c.What)
	}
	return strings.Join(s, "\n")
}

// errorWorkflow returns the one workflow holding the shipped report node.
func errorWorkflow(t *testing.T, f *n8ntest.Fake) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, w := range f.Workflows() {
		for _, n := range w["nodes"].([]any) {
			if n.(map[string]any)["id"] == "5e7a0000-0000-4000-8000-000000000002" {
				found = append(found, w)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d error workflows in n8n, want 1", len(found))
	}
	return found[0]
}

func node(w map[string]any, name string) map[string]any {
	for _, n := range w["nodes"].([]any) {
		if n.(map[string]any)["name"] == name {
			return n.(map[string]any)
		}
	}
	return nil
}

func param(n map[string]any, key string) any { return n["parameters"].(map[string]any)[key] }

func credID(n map[string]any) any {
	return n["credentials"].(map[string]any)["httpHeaderAuth"].(map[string]any)["id"]
}

func TestWireAFreshN8N(t *testing.T) {
	f := n8ntest.NewFake(t)
	live := f.AddWorkflow(userWorkflow("Orders", "orders"), true)
	draft := f.AddWorkflow(userWorkflow("Draft", "draft"), false)
	want := n8n.Wiring{ServiceURL: serviceURL, Token: token, WithExample: true, Workflows: []string{live, draft}}

	p, err := plan(t, f, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, says := range []string{`create the Header Auth credential "retryaudit"`,
		`import the error workflow "retryaudit: report errors", reporting to http://retryaudit:8080/v1/n8n/errors`,
		`publish "retryaudit: report errors"`, `import the example "Orders to CRM (with retryaudit)"`,
		`set the error workflow of "Orders" (` + live + `) to "retryaudit: report errors" (it had none); n8n publishes it again`,
		`set the error workflow of "Draft" (` + draft + `)`, `it is not published, and stays so`} {
		if !strings.Contains(whats(p), says) {
			t.Errorf("the plan does not say %q:\n%s", says, whats(p))
		}
	}
	if len(p.Changes) != 6 {
		t.Errorf("%d changes, want 6:\n%s", len(p.Changes), whats(p))
	}
	if err := p.Apply(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Watch(context.Background(), 0, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	data, cred, count := f.Credential("retryaudit")
	if count != 1 || data["name"] != "Authorization" || data["value"] != "Bearer "+token {
		t.Errorf("%d credentials retryaudit, data %v", count, data)
	}
	ew := errorWorkflow(t, f)
	report := node(ew, "Report to retryaudit")
	if param(report, "url") != serviceURL+"/v1/n8n/errors" || credID(report) != cred {
		t.Errorf("the error workflow reports to %v with credential %v", param(report, "url"), credID(report))
	}
	if ew["active"] != true || ew["activeVersionId"] != ew["versionId"] {
		t.Error("the error workflow is not published")
	}
	for id, active := range map[string]bool{live: true, draft: false} {
		w := f.Workflow(id)
		s := w["settings"].(map[string]any)
		if s["errorWorkflow"] != ew["id"] || s["timezone"] != "Europe/Berlin" || s["executionOrder"] != "v1" {
			t.Errorf("%s's settings are %v: the error workflow set, the rest untouched", w["name"], s)
		}
		if w["active"] != active {
			t.Errorf("%s is published: %v, want %v", w["name"], w["active"], active)
		}
	}
	var example map[string]any
	for _, w := range f.Workflows() {
		if w["name"] == "Orders to CRM (with retryaudit)" {
			example = w
		}
	}
	if example == nil || example["active"] == true || param(node(example, "Claim event"), "url") != serviceURL+"/v1/claims" ||
		credID(node(example, "Report outcome")) != cred || example["settings"].(map[string]any)["errorWorkflow"] != ew["id"] {
		t.Errorf("the example is not imported unpublished, pointed at the service and its error workflow: %v", example)
	}

	t.Run("a second run has nothing to change", func(t *testing.T) {
		again, err := plan(t, f, want)
		if err != nil || len(again.Changes) != 0 {
			t.Fatalf("%v:\n%s", err, whats(again))
		}
		if !strings.Contains(strings.Join(again.Kept, "\n"), "is there already") {
			t.Errorf("the second run does not say the example is there: %v", again.Kept)
		}
	})
}

func TestWireRefusesAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *n8ntest.Fake) (apiURL string, w n8n.Wiring)
		says  string
	}{
		{"a key without credential:create", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			f.Scopes = slices.DeleteFunc(f.Scopes, func(s string) bool { return s == "credential:create" })
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, "lacks the scope credential:create, needed to create the Header Auth credential"},
		{"a key that cannot publish", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			f.Scopes = slices.DeleteFunc(f.Scopes, func(s string) bool { return s == "workflow:activate" })
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, "lacks the scope workflow:activate"},
		{"a key that cannot list credentials", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			f.Scopes = []string{"workflow:list", "workflow:read"}
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, "lacks the scope credential:list"},
		{"an n8n without /discover", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			f.NoDiscover = true
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, "has no /discover"},
		{"an n8n 1.x without publish", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			f.NoPublish = true
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, "n8n 2.x publishes workflows there"},
		{"the editor's URL instead of the API's", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			return f.URL, n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, "is not n8n's public API (it answered with a web page): the URL ends in /api/v1"},
		{"a workflow id n8n does not have", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{"nope123"}}
		}, `n8n has no workflow "nope123"`},
		{"two credentials named retryaudit", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			f.AddCredential("retryaudit", "httpHeaderAuth", nil)
			f.AddCredential("retryaudit", "httpHeaderAuth", nil)
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, `2 credentials are named "retryaudit"`},
		{"a credential retryaudit of another type", func(f *n8ntest.Fake) (string, n8n.Wiring) {
			f.AddCredential("retryaudit", "httpBasicAuth", nil)
			return f.APIURL(), n8n.Wiring{ServiceURL: serviceURL, Token: token}
		}, "is a httpBasicAuth, not a Header Auth credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := n8ntest.NewFake(t)
			api, w := tc.setup(f)
			_, err := n8n.PlanWiring(context.Background(), n8n.NewAdmin(api, n8ntest.Key), w)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want it to say %q", err, tc.says)
			}
			if m := f.Mutations(); len(m) > 0 {
				t.Errorf("a refused run wrote %v", m)
			}
		})
	}
	t.Run("a key n8n refuses", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		_, err := n8n.PlanWiring(context.Background(), n8n.NewAdmin(f.APIURL(), "wrong"), n8n.Wiring{ServiceURL: serviceURL, Token: token})
		if err == nil || !strings.Contains(err.Error(), "refused the API key (401") || strings.Contains(err.Error(), "wrong") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no n8n at the address", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		f.Close()
		_, err := n8n.PlanWiring(context.Background(), n8n.NewAdmin(f.APIURL(), n8ntest.Key), n8n.Wiring{ServiceURL: serviceURL, Token: token})
		if err == nil || !strings.Contains(err.Error(), "n8n does not answer at "+f.APIURL()) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("the error workflow named in --workflows", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		wire(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token})
		id := errorWorkflow(t, f)["id"].(string)
		_, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{id}})
		if err == nil || !strings.Contains(err.Error(), "is retryaudit's error workflow itself") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestWireFollowsChanges(t *testing.T) {
	t.Run("a new token is written, once", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		wire(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token})
		p, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: "a-new-token"})
		if err != nil || len(p.Changes) != 2 || !strings.Contains(whats(p), `write retryaudit's token into the credential "retryaudit"`) ||
			!strings.Contains(whats(p), "it remembers which token connect wrote") {
			t.Fatalf("%v:\n%s", err, whats(p))
		}
		wire(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: "a-new-token"})
		if data, _, _ := f.Credential("retryaudit"); data["value"] != "Bearer a-new-token" {
			t.Errorf("the credential holds %v", data["value"])
		}
		if again, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: "a-new-token"}); err != nil || len(again.Changes) != 0 {
			t.Errorf("%v:\n%s", err, whats(again))
		}
	})
	t.Run("a credential a person edited is written again", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		wire(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token})
		_, id, _ := f.Credential("retryaudit")
		f.EditCredential(id, map[string]any{"name": "Authorization", "value": "Bearer typo"})
		p, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token})
		if err != nil || !strings.Contains(whats(p), "write retryaudit's token") {
			t.Fatalf("%v:\n%s", err, whats(p))
		}
	})
	t.Run("a moved service: the error workflow reports to the new address, published", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		wire(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token})
		before := errorWorkflow(t, f)
		p, err := plan(t, f, n8n.Wiring{ServiceURL: "https://audit.example.com", Token: token})
		if err != nil || len(p.Changes) != 1 ||
			!strings.Contains(whats(p), "it reports to http://retryaudit:8080/v1/n8n/errors, not https://audit.example.com/v1/n8n/errors; n8n publishes the update") {
			t.Fatalf("%v:\n%s", err, whats(p))
		}
		wire(t, f, n8n.Wiring{ServiceURL: "https://audit.example.com", Token: token})
		after := errorWorkflow(t, f)
		if param(node(after, "Report to retryaudit"), "url") != "https://audit.example.com/v1/n8n/errors" ||
			after["versionId"] == before["versionId"] || after["activeVersionId"] != after["versionId"] {
			t.Errorf("the error workflow is not the new version, published: %v", after)
		}
	})
	t.Run("an error workflow imported by hand is adopted, not duplicated", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		raw, err := os.ReadFile("error-workflow.json")
		if err != nil {
			t.Fatal(err)
		}
		f.AddCredential("retryaudit", "httpHeaderAuth", map[string]any{"name": "Authorization", "value": "Bearer old"})
		f.AddWorkflow(workflowFromJSON(t, strings.ReplaceAll(string(raw), "http://127.0.0.1:8080", serviceURL)), true)
		p, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token})
		if err != nil || !strings.Contains(whats(p), "connect marks it as retryaudit's error workflow") ||
			strings.Contains(whats(p), "import the error workflow") {
			t.Fatalf("%v:\n%s", err, whats(p))
		}
		wire(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token})
		errorWorkflow(t, f) // exactly one
		if again, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token}); err != nil || len(again.Changes) != 0 {
			t.Errorf("%v:\n%s", err, whats(again))
		}
	})
}

func TestWireAllActive(t *testing.T) {
	f := n8ntest.NewFake(t)
	plain := f.AddWorkflow(userWorkflow("Plain", "plain"), true)
	owned := userWorkflow("Has its own", "owned")
	owned["settings"].(map[string]any)["errorWorkflow"] = "someOtherFlow"
	other := f.AddWorkflow(owned, true)
	draft := f.AddWorkflow(userWorkflow("Draft", "draft"), false)

	p, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, AllActive: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(whats(p), `"Plain" (`+plain+`)`) || strings.Contains(whats(p), other) || strings.Contains(whats(p), draft) {
		t.Errorf("--all-active should set Plain only:\n%s", whats(p))
	}
	if !strings.Contains(strings.Join(p.Kept, "\n"), `"Has its own" (`+other+`) keeps its own error workflow someOtherFlow`) {
		t.Errorf("kept: %v", p.Kept)
	}
	p, err = plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, AllActive: true, Workflows: []string{other}})
	if err != nil || !strings.Contains(whats(p), `"Has its own" (`+other+`) to "retryaudit: report errors" (it had someOtherFlow)`) {
		t.Errorf("a workflow named replaces its error workflow: %v\n%s", err, whats(p))
	}
}

func TestWatch(t *testing.T) {
	t.Run("waits until n8n registers the webhooks it published", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		id := f.AddWorkflow(userWorkflow("Orders", "orders"), true)
		p, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		f.WebhookMisses = 3
		if err := p.Watch(context.Background(), 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		if f.WebhookMisses != 0 {
			t.Errorf("Watch returned before the webhook answered (%d misses left)", f.WebhookMisses)
		}
	})
	t.Run("names a webhook n8n never registers", func(t *testing.T) {
		f := n8ntest.NewFake(t)
		id := f.AddWorkflow(userWorkflow("Orders", "orders"), true)
		p, _ := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{id}})
		if err := p.Apply(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		f.WebhookMisses = 1 << 30
		err := p.Watch(context.Background(), 0, 500*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), `has not registered the webhook /webhook/orders of "Orders"`) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestApplyStopsAndSaysHowFar(t *testing.T) {
	f := n8ntest.NewFake(t)
	id := f.AddWorkflow(userWorkflow("Orders", "orders"), true)
	p, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	f.SetScopes(slices.DeleteFunc(slices.Clone(n8ntest.AllScopes), func(s string) bool { return s == "workflow:update" })...) // taken away meanwhile
	err = p.Apply(context.Background(), nil)
	var apiErr *n8n.APIError
	if err == nil || !errors.As(err, &apiErr) || !strings.Contains(err.Error(), "3 of 4 changes made") {
		t.Fatalf("err = %v", err)
	}
	f.SetScopes(n8ntest.AllScopes...)
	wire(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{id}})
	if again, err := plan(t, f, n8n.Wiring{ServiceURL: serviceURL, Token: token, Workflows: []string{id}}); err != nil || len(again.Changes) != 0 {
		t.Errorf("%v:\n%s", err, whats(again))
	}
}

func workflowFromJSON(t *testing.T, raw string) map[string]any {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(raw), &w); err != nil {
		t.Fatal(err)
	}
	return w
}
