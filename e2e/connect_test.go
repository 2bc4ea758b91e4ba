//go:build n8n

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// wireWithConnect wires n8n as the README says now: the user's own
// workflows are there already (the orders workflow imported from the
// template and pointed at their CRM, a copy for a second sender, a polling
// feed; the two webhooks published), an API key was made in Settings → n8n
// API, and retryaudit connect does the rest, alone. Before it, a dry run
// must change nothing; after it, a second run must have nothing to change.
func (s *suite) wireWithConnect(t *testing.T) {
	n := s.n8n
	n.setUp(t)
	orders := shipped(t, "orders-to-crm.json", map[string]string{shippedServiceURL: s.serviceURL, shippedCRMURL: s.crm.api()})
	s.orders = n.importWorkflow(t, orders)
	s.market = n.importWorkflow(t, secondSender(t, orders))
	s.feed = n.importWorkflow(t, failingFeed(t, s.crm.URL+"/rss"))
	for _, w := range []workflow{s.orders, s.market} {
		n.publish(t, w.ID)
	}

	env := s.connectEnv(t)
	svc := startService(t, s.bin, env)
	defer svc.stop(t)
	args := s.connectArgs()

	before := n.snapshot(t)
	out := s.connect(t, env, append(slices.Clone(args), "--dry-run")...)
	if !strings.Contains(out, "plan  1. create the Header Auth credential") || !strings.Contains(out, "none made") {
		t.Errorf("the dry run printed no plan:\n%s", out)
	}
	if after := n.snapshot(t); after != before {
		t.Fatalf("the dry run changed n8n:\nbefore %s\nafter  %s", before, after)
	}

	out = s.connect(t, env, args...)
	for _, says := range []string{`done  2. import the error workflow "retryaudit: report errors"`,
		"ok    published", "all checks passed"} {
		if !strings.Contains(out, says) {
			t.Errorf("connect did not say %q:\n%s", says, out)
		}
	}
	t.Logf("retryaudit connect:\n%s", out)

	out = s.connect(t, env, args...)
	if !strings.Contains(out, "nothing to change") || strings.Contains(out, "done  ") {
		t.Errorf("a second connect changed something:\n%s", out)
	}

	s.errors = n.workflowNamed(t, "retryaudit: report errors")
	for _, w := range []workflow{s.orders, s.market, s.feed} {
		var got workflow
		n.api(t, "GET", "/workflows/"+w.ID, nil, http.StatusOK, &got)
		if got.Settings["errorWorkflow"] != s.errors.ID {
			t.Errorf("%s's error workflow is %v, want %s", got.Name, got.Settings["errorWorkflow"], s.errors.ID)
		}
	}
}

// connectEnv is the configuration connect runs with: the service's, beside
// a running service (connect checks that it answers, and ends with the
// drill).
func (s *suite) connectEnv(t *testing.T) map[string]string {
	return map[string]string{
		"RETRYAUDIT_ADDR":           strings.TrimPrefix(s.serviceURL, "http://"),
		"RETRYAUDIT_TOKEN":          s.token,
		"RETRYAUDIT_DATA_DIR":       t.TempDir(),
		"RETRYAUDIT_N8N_EDITOR_URL": s.n8n.URL,
		"RETRYAUDIT_N8N_API_URL":    s.n8n.URL + "/api/v1",
		"RETRYAUDIT_N8N_API_KEY":    s.n8n.APIKey,
	}
}

// connectArgs is the user's connect command.
func (s *suite) connectArgs() []string {
	return []string{"connect", "--service-url", s.serviceURL, "--with-example",
		"--workflows", strings.Join([]string{s.orders.ID, s.market.ID, s.feed.ID}, ",")}
}

// connectAgain runs the user's connect once more after the control runs:
// the error workflow has run, been unpublished and published again, and
// still nothing is to change.
func (s *suite) connectAgain(t *testing.T) {
	env := s.connectEnv(t)
	svc := startService(t, s.bin, env)
	defer svc.stop(t)
	if out := s.connect(t, env, s.connectArgs()...); !strings.Contains(out, "nothing to change") || strings.Contains(out, "done  ") {
		t.Errorf("connect after the control runs changed something:\n%s", out)
	}
}

// connect runs retryaudit connect with env and returns what it printed.
func (s *suite) connect(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("retryaudit %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// snapshot is what wiring could change in n8n, as the public API shows it:
// every credential and every workflow's version, publication, settings
// and static data.
func (n *n8n) snapshot(t *testing.T) string {
	t.Helper()
	var creds struct {
		Data []map[string]any `json:"data"`
	}
	n.api(t, "GET", "/credentials", nil, http.StatusOK, &creds)
	var wfs struct {
		Data []map[string]any `json:"data"`
	}
	n.api(t, "GET", "/workflows?limit=250", nil, http.StatusOK, &wfs)
	var parts []string
	for _, c := range creds.Data {
		parts = append(parts, fmt.Sprintf("credential %v %v %v", c["id"], c["name"], c["updatedAt"]))
	}
	for _, w := range wfs.Data {
		b, _ := json.Marshal([]any{w["versionId"], w["active"], w["activeVersionId"], w["settings"], w["staticData"], w["nodes"]})
		parts = append(parts, fmt.Sprintf("workflow %v %s", w["id"], b))
	}
	slices.Sort(parts)
	return strings.Join(parts, "\n")
}

// workflowNamed finds the one workflow with that name.
func (n *n8n) workflowNamed(t *testing.T, name string) workflow {
	t.Helper()
	var page struct {
		Data []workflow `json:"data"`
	}
	n.api(t, "GET", "/workflows?limit=250", nil, http.StatusOK, &page)
	var found []workflow
	for _, w := range page.Data {
		if w.Name == name {
			found = append(found, w)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d workflows named %q, want 1", len(found), name)
	}
	return found[0]
}
