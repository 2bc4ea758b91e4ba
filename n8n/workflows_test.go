package n8n_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type workflow struct {
	Name  string `json:"name"`
	Nodes []struct {
		Name        string                     `json:"name"`
		Type        string                     `json:"type"`
		Parameters  map[string]any             `json:"parameters"`
		Credentials map[string]json.RawMessage `json:"credentials"`
	} `json:"nodes"`
	Connections map[string]struct {
		Main [][]struct {
			Node string `json:"node"`
		} `json:"main"`
	} `json:"connections"`
	Settings map[string]any `json:"settings"`
}

func loadWorkflow(t *testing.T, path string) workflow {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	names := map[string]bool{}
	for _, n := range w.Nodes {
		if names[n.Name] {
			t.Errorf("%s: two nodes named %q", path, n.Name)
		}
		names[n.Name] = true
	}
	for from, c := range w.Connections {
		if !names[from] {
			t.Errorf("%s: a connection from unknown node %q", path, from)
		}
		for _, out := range c.Main {
			for _, to := range out {
				if !names[to.Node] {
					t.Errorf("%s: a connection to unknown node %q", path, to.Node)
				}
			}
		}
	}
	return w
}

func (w workflow) node(t *testing.T, name string) (string, map[string]any, map[string]json.RawMessage) {
	t.Helper()
	for _, n := range w.Nodes {
		if n.Name == name {
			return n.Type, n.Parameters, n.Credentials
		}
	}
	t.Fatalf("%s has no node %q", w.Name, name)
	return "", nil, nil
}

// next returns the nodes that output i of a node feeds.
func (w workflow) next(from string, output int) []string {
	var out []string
	if c, ok := w.Connections[from]; ok && output < len(c.Main) {
		for _, to := range c.Main[output] {
			out = append(out, to.Node)
		}
	}
	return out
}

// checkCall checks a node that calls retryaudit: POST to the endpoint with
// the Header Auth credential.
func checkCall(t *testing.T, w workflow, name, endpoint string) map[string]any {
	t.Helper()
	typ, p, creds := w.node(t, name)
	if typ != "n8n-nodes-base.httpRequest" || p["method"] != "POST" {
		t.Errorf("%s: type %s method %v", name, typ, p["method"])
	}
	if url, _ := p["url"].(string); !strings.HasSuffix(url, endpoint) {
		t.Errorf("%s posts to %v, want …%s", name, p["url"], endpoint)
	}
	if p["authentication"] != "genericCredentialType" || p["genericAuthType"] != "httpHeaderAuth" ||
		creds["httpHeaderAuth"] == nil {
		t.Errorf("%s does not use a Header Auth credential: %v %v", name, p, creds)
	}
	return p
}

func TestErrorWorkflow(t *testing.T) {
	w := loadWorkflow(t, "error-workflow.json")
	typ, _, _ := w.node(t, "Error Trigger")
	if typ != "n8n-nodes-base.errorTrigger" {
		t.Errorf("trigger type %s", typ)
	}
	next := w.next("Error Trigger", 0)
	if len(next) != 1 {
		t.Fatalf("the Error Trigger feeds %v", next)
	}
	p := checkCall(t, w, next[0], "/v1/n8n/errors")
	body, _ := p["jsonBody"].(string)
	for _, want := range []string{"$json", "message:", "$json.execution?.error?.message ?? $json.trigger?.error?.message"} {
		if !strings.Contains(body, want) {
			t.Errorf("the body %q lacks %q", body, want)
		}
	}
}

func TestOrdersWorkflow(t *testing.T) {
	w := loadWorkflow(t, "orders-to-crm.json")
	typ, hook, _ := w.node(t, "Webhook")
	if typ != "n8n-nodes-base.webhook" || hook["responseMode"] != "responseNode" {
		t.Errorf("webhook: %s %v", typ, hook)
	}
	if got := w.next("Webhook", 0); len(got) != 1 || got[0] != "Claim event" {
		t.Fatalf("the webhook feeds %v, want the claim first", got)
	}
	claim := checkCall(t, w, "Claim event", "/v1/claims")
	for _, field := range []string{`"event_id"`, `$execution.id`, `$workflow.id`, `"source"`} {
		if !strings.Contains(claim["jsonBody"].(string), field) {
			t.Errorf("the claim body lacks %s", field)
		}
	}
	if got := w.next("Claim event", 0); len(got) != 1 || got[0] != "Process?" {
		t.Fatalf("the claim feeds %v", got)
	}
	if _, p, _ := w.node(t, "Process?"); !strings.Contains(mustJSON(p), "$json.process") {
		t.Errorf("the IF does not test process: %v", p)
	}
	yes, no := w.next("Process?", 0), w.next("Process?", 1)
	if len(yes) != 1 || yes[0] != "Create CRM order" {
		t.Errorf("process=true goes to %v", yes)
	}
	if len(no) != 1 {
		t.Fatalf("process=false goes to %v", no)
	}
	if typ, p, _ := w.node(t, no[0]); typ != "n8n-nodes-base.respondToWebhook" || !strings.Contains(mustJSON(p), "ok: true") {
		t.Errorf("duplicates are not answered with success: %s %v", typ, p)
	}
	typ, crm, _ := w.node(t, "Create CRM order")
	code, _ := crm["jsCode"].(string)
	if typ != "n8n-nodes-base.code" || !strings.Contains(code, "idempotency_key") || !strings.Contains(code, "GET") ||
		!strings.Contains(code, "'failed'") || !strings.Contains(code, "'unknown'") {
		t.Errorf("the CRM step must look up before creating, pass the idempotency key and report failed/unknown")
	}
	if got := w.next("Create CRM order", 0); len(got) != 1 || got[0] != "Report outcome" {
		t.Fatalf("the CRM step feeds %v", got)
	}
	out := checkCall(t, w, "Report outcome", "/v1/outcomes")
	if !strings.Contains(out["jsonBody"].(string), "$json.outcome") {
		t.Error("the outcome body does not carry the CRM step's outcome")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
