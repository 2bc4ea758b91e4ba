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
	if got := w.next("Webhook", 0); len(got) != 1 || got[0] != "Event" {
		t.Fatalf("the webhook feeds %v, want the Event node first", got)
	}
	typ, ev, _ := w.node(t, "Event")
	event, _ := ev["jsCode"].(string)
	if typ != "n8n-nodes-base.code" {
		t.Errorf("Event is a %s", typ)
	}
	for _, field := range []string{"source:", "event_id:", "fingerprint:", "delivery_id:", "headers"} {
		if !strings.Contains(event, field) {
			t.Errorf("the Event node does not compute %s", field)
		}
	}
	// The source is set once: no other node names it.
	raw, _ := os.ReadFile("orders-to-crm.json")
	if n := strings.Count(string(raw), `'shop'`) + strings.Count(string(raw), `\"shop\"`); n != 1 {
		t.Errorf("the source is written %d times in the workflow, want once (in the Event node)", n)
	}
	if got := w.next("Event", 0); len(got) != 1 || got[0] != "Claim event" {
		t.Fatalf("the Event node feeds %v, want the claim", got)
	}
	claim := checkCall(t, w, "Claim event", "/v1/claims")
	for _, field := range []string{`"source": {{ JSON.stringify($json.source) }}`, `"event_id"`, `$execution.id`,
		`$workflow.id`, `"fingerprint"`, `"delivery_id": {{ JSON.stringify($json.delivery_id) }}`} {
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
	if typ != "n8n-nodes-base.code" {
		t.Errorf("the CRM step is a %s", typ)
	}
	begin, end := strings.Index(code, "// ==== The CRM"), strings.Index(code, "// ==== End of the CRM part")
	if begin < 0 || end < begin {
		t.Fatal("the CRM step has no marked block for what is specific to the CRM")
	}
	block, rest := code[begin:end], code[end:]
	for _, want := range []string{"base:", "lookup:", "found:", "create:", "created:", "Idempotency-Key"} {
		if !strings.Contains(block, want) {
			t.Errorf("the CRM block lacks %s", want)
		}
	}
	if strings.Contains(rest, "https://") || strings.Contains(code[:begin], "https://") {
		t.Error("a URL outside the CRM block")
	}
	for _, want := range []string{"idempotency_key", "'failed'", "throw new Error(`CRM outcome unknown for ${event.source}/${event.event_id}"} {
		if !strings.Contains(code, want) {
			t.Errorf("the CRM step lacks %s", want)
		}
	}
	if strings.Contains(code, "outcome: 'unknown'") {
		t.Error("the CRM step returns unknown instead of failing the execution: n8n could not retry it")
	}
	if i, j := strings.Index(rest, "CRM.lookup("), strings.Index(rest, "CRM.create("); i < 0 || j < i {
		t.Error("the CRM step does not look the order up before it creates it")
	}
	if got := w.next("Create CRM order", 0); len(got) != 1 || got[0] != "Report outcome" {
		t.Fatalf("the CRM step feeds %v", got)
	}
	out := checkCall(t, w, "Report outcome", "/v1/outcomes")
	for _, want := range []string{"$json.outcome", "$execution.id", "$workflow.id", "$('Event').item.json.source"} {
		if !strings.Contains(out["jsonBody"].(string), want) {
			t.Errorf("the outcome body lacks %s", want)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
