//go:build n8n

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// nodeExampleName is n8n/orders-to-crm-node.json's workflow, and nodePath
// its webhook.
const (
	nodeExampleName = "Orders to CRM (with the retryaudit node)"
	nodePath        = "orders-node"
)

// TestRealN8NNode loads the packed retryaudit node (make node:
// bin/n8n-nodes-retryaudit-*.tgz) into a real n8n through
// N8N_CUSTOM_EXTENSIONS, wires it with retryaudit connect
// --with-example=node, tests the node's credential through n8n's
// credential test endpoint (the right token, a wrong one), and runs control
// steps through the node template: duplicates skipped, one order each, a
// Retry of a failed execution reporting through the node, and the custom
// execution data the Claim sets, as n8n's API shows it.
func TestRealN8NNode(t *testing.T) {
	began := time.Now()
	home := os.Getenv("RETRYAUDIT_TEST_N8N_HOME")
	if home == "" {
		t.Fatal("RETRYAUDIT_TEST_N8N_HOME is unset: run make test-n8n, which installs n8n and sets it")
	}
	ext := unpackNode(t)
	s := &suite{crm: newFakeCRM(t), slack: newFakeSlack(t), bin: buildService(t), token: randomToken(), hookToken: randomToken()}
	s.serviceURL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	s.n8n = startN8NWith(t, home, n8nConfig{Env: []string{"N8N_CUSTOM_EXTENSIONS=" + ext}})
	n := s.n8n
	n.setUp(t)
	// What a user runs once the node is installed, with retryaudit's own
	// configuration (connect ends with the drill of retryaudit check).
	args := []string{"connect", "--service-url", s.serviceURL, "--with-example=node"}
	env := s.connectEnv(t)
	svc := startService(t, s.bin, env)
	out := s.connect(t, env, args...)
	svc.stop(t)
	for _, says := range []string{`create the retryaudit API credential "retryaudit API"`,
		`import the example "` + nodeExampleName + `" with the retryaudit node (CUSTOM.retryaudit)`, "all checks passed"} {
		if !strings.Contains(out, says) {
			t.Errorf("connect did not say %q:\n%s", says, out)
		}
	}
	t.Logf("retryaudit connect --with-example=node:\n%s", out)
	example := s.pointNodeExampleAtCRM(t)
	n.publish(t, example.ID)
	r := &run{suite: s, t: t, backend: "sqlite", svc: s.startService(t, "sqlite"), prefix: "nd"}
	t.Logf("timing: n8n started and wired in %s", time.Since(began).Round(time.Second))

	steps := []step{
		{"the credential's Test: the right token passes, a wrong one fails", s.credentialTest},
		{"the same body twice: one order, then Skip (duplicate); the custom execution data", r.nodeSameBodyTwice},
		{"several deliveries at once: one order", r.nodeSeveralAtOnce},
		{"a redelivery while the first run is still going: Skip (in_progress)", r.nodeRedeliveryWhileRunning},
		{"a CRM that creates and never answers, then a Retry reports through the node", func(t *testing.T) {
			r.nodeRetry(t, example.ID)
		}},
		{"a 422, then a redelivery that reclaims", r.nodeRefusedThenReclaimed},
		{"retryaudit down during the Claim: the item fails clearly; a Retry claims with the stamp it replays", func(t *testing.T) {
			r.nodeServiceDown(t, example.ID)
		}},
		{"connect again: nothing to change", func(t *testing.T) {
			r.svc.stop(t)
			svc := startService(t, s.bin, env)
			defer svc.stop(t)
			if out := s.connect(t, env, args...); !strings.Contains(out, "nothing to change") ||
				!strings.Contains(out, "the node example") {
				t.Errorf("a second connect --with-example=node:\n%s", out)
			}
		}},
	}
	for _, st := range steps {
		start := time.Now()
		t.Run(st.name, st.fn)
		t.Logf("timing: %-75s %6s", st.name, time.Since(start).Round(100*time.Millisecond))
	}
	t.Logf("timing: TestRealN8NNode took %s", time.Since(began).Round(time.Second))
}

// unpackNode unpacks the newest bin/n8n-nodes-retryaudit-*.tgz into a
// folder for N8N_CUSTOM_EXTENSIONS, as a user unpacks it beside n8n.
func unpackNode(t *testing.T) string {
	t.Helper()
	tgzs, _ := filepath.Glob(filepath.Join("..", "bin", "n8n-nodes-retryaudit-*.tgz"))
	if len(tgzs) == 0 {
		t.Fatal("bin/ has no n8n-nodes-retryaudit-*.tgz: run make node (make test-n8n does)")
	}
	newest := tgzs[0]
	for _, p := range tgzs[1:] {
		a, _ := os.Stat(p)
		b, _ := os.Stat(newest)
		if a.ModTime().After(b.ModTime()) {
			newest = p
		}
	}
	ext := t.TempDir()
	dir := filepath.Join(ext, "n8n-nodes-retryaudit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xzf", newest, "-C", dir, "--strip-components=1").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	t.Logf("the node: %s", newest)
	return ext
}

// pointNodeExampleAtCRM edits the imported node template as a user does:
// only the CRM block's address, to the fake CRM.
func (s *suite) pointNodeExampleAtCRM(t *testing.T) workflow {
	t.Helper()
	n := s.n8n
	w := n.workflowNamed(t, nodeExampleName)
	var full struct {
		Name        string           `json:"name"`
		Nodes       []map[string]any `json:"nodes"`
		Connections map[string]any   `json:"connections"`
		Settings    map[string]any   `json:"settings"`
	}
	n.api(t, "GET", "/workflows/"+w.ID, nil, http.StatusOK, &full)
	found := false
	for _, node := range full.Nodes {
		switch node["name"] {
		case "Claim event", "Report outcome":
			if node["type"] != "CUSTOM.retryaudit" {
				t.Errorf("%s is a %v: a node loaded from N8N_CUSTOM_EXTENSIONS is CUSTOM.retryaudit", node["name"], node["type"])
			}
		case "Create CRM order":
			p := node["parameters"].(map[string]any)
			code := p["jsCode"].(string)
			if strings.Contains(code, shippedCRMURL) {
				p["jsCode"], found = strings.ReplaceAll(code, shippedCRMURL, s.crm.api()), true
			}
		}
	}
	if !found {
		t.Fatalf("the node template's CRM block has no %s to change", shippedCRMURL)
	}
	n.api(t, "PUT", "/workflows/"+w.ID, map[string]any{"name": full.Name, "nodes": full.Nodes,
		"connections": full.Connections, "settings": full.Settings}, http.StatusOK, nil)
	return w
}

// credentialTest presses Test on the node's credential, through n8n's
// credential test endpoint: the one connect made (the service's token),
// then one with a wrong token.
func (s *suite) credentialTest(t *testing.T) {
	n := s.n8n
	var creds struct {
		Data []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"data"`
	}
	n.api(t, "GET", "/credentials", nil, http.StatusOK, &creds)
	id := ""
	for _, c := range creds.Data {
		if c.Name == "retryaudit API" && c.Type == "retryauditApi" {
			id = c.ID
		}
	}
	if id == "" {
		t.Fatalf("n8n has no retryaudit API credential: %+v", creds.Data)
	}
	type result struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	var good result
	n.api(t, "POST", "/credentials/"+id+"/test", nil, http.StatusOK, &good)
	if good.Status != "OK" {
		t.Errorf("Test of the credential connect made says %+v, want OK", good)
	}
	var wrong struct {
		ID string `json:"id"`
	}
	n.api(t, "POST", "/credentials", map[string]any{"name": "retryaudit API (wrong token)", "type": "retryauditApi",
		"data": map[string]any{"url": s.serviceURL, "token": "not-the-token"}}, http.StatusOK, &wrong)
	var bad result
	n.api(t, "POST", "/credentials/"+wrong.ID+"/test", nil, http.StatusOK, &bad)
	if bad.Status != "Error" {
		t.Errorf("Test of a credential with a wrong token says %+v, want Error", bad)
	}
	t.Logf("Test, the right token: %+v; a wrong token: %+v", good, bad)
}

// customData reads the custom execution data n8n's public API shows for an
// execution, once it has stopped (the webhook is answered before n8n saves
// the execution).
func (n *n8n) customData(t *testing.T, id string) map[string]string {
	t.Helper()
	n.waitExecution(t, id)
	var x struct {
		CustomData map[string]string `json:"customData"`
	}
	n.api(t, "GET", "/executions/"+id+"?includeData=true", nil, http.StatusOK, &x)
	return x.CustomData
}

func (r *run) nodeSameBodyTwice(t *testing.T) {
	before := r.crm.count()
	id := r.newID()
	status, out := r.deliver(t, nodePath, id)
	if status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("the first delivery was answered %d %v; %s", status, out, r.n8n.lastRun(t, r.n8n.workflowNamed(t, nodeExampleName).ID))
	}
	o := r.oneOrder(t, "shop", id)
	status, out = r.deliver(t, nodePath, id)
	if status != http.StatusOK || out["duplicate"] != true || out["decision"] != "duplicate" {
		t.Fatalf("the second delivery was answered %d %v, want 200 duplicate (the Skip output)", status, out)
	}
	if got := r.crm.count(); got != before+1 {
		t.Errorf("the CRM holds %d orders, want %d", got, before+1)
	}
	e := r.ledger(t, "shop", id)
	if e.Status != "done" || e.Deliveries != 2 || e.CRMRef != o.ID || strings.Join(e.decisions(), ",") != "claimed,duplicate" {
		t.Errorf("ledger: status %s, deliveries %d, crm_ref %q, decisions %v", e.Status, e.Deliveries, e.CRMRef, e.decisions())
	}
	other := ""
	for _, x := range e.Executions {
		if x.Role == "claim" && x.Mode != "webhook" {
			t.Errorf("execution %s was recorded with mode %q: the node sends n8n's own (webhook)", x.ExecutionID, x.Mode)
		}
		if x.Role == "claim" && !strings.HasPrefix(x.DeliveryID, "d-"+id+"-") {
			t.Errorf("execution %s has delivery id %q: the Claim's Delivery ID option did not reach retryaudit", x.ExecutionID, x.DeliveryID)
		}
		if x.ExecutionID != e.HolderExecutionID {
			other = x.ExecutionID
		}
	}
	// The custom execution data: stored by n8n on every edition and shown
	// by its public API; the editor's executions list shows and filters
	// by it with advanced execution filters (n8n Pro and Enterprise).
	holder := r.n8n.customData(t, e.HolderExecutionID)
	if holder["retryaudit_event"] != "shop:"+id || holder["retryaudit_decision"] != "claimed" ||
		!strings.HasPrefix(holder["retryaudit_run_stamp"], e.HolderExecutionID+":") {
		t.Errorf("the claiming execution's custom data is %v", holder)
	}
	if other == "" {
		t.Fatal("the ledger lists no second execution")
	}
	if dup := r.n8n.customData(t, other); dup["retryaudit_event"] != "shop:"+id || dup["retryaudit_decision"] != "duplicate" {
		t.Errorf("the skipped execution's custom data is %v", dup)
	}
	t.Logf("custom data of %s: %v", e.HolderExecutionID, holder)
}

func (r *run) nodeSeveralAtOnce(t *testing.T) {
	id := r.newID()
	const n = 6
	var wg sync.WaitGroup
	answers := make([]map[string]any, n)
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], answers[i] = r.deliver(t, nodePath, id)
		}()
	}
	wg.Wait()
	done := 0
	for i := range n {
		switch {
		case codes[i] == http.StatusOK && answers[i]["outcome"] == "done":
			done++
		case codes[i] == http.StatusOK && answers[i]["duplicate"] == true:
		default:
			t.Errorf("a delivery was answered %d %v", codes[i], answers[i])
		}
	}
	if done != 1 {
		t.Errorf("%d deliveries took the Act output, want 1", done)
	}
	r.oneOrder(t, "shop", id)
	if e := r.ledger(t, "shop", id); e.Status != "done" || e.Deliveries != n {
		t.Errorf("ledger: status %s, deliveries %d, decisions %v", e.Status, e.Deliveries, e.decisions())
	}
}

func (r *run) nodeRedeliveryWhileRunning(t *testing.T) {
	id := r.newID()
	r.crm.setMode(crmSlow)
	defer r.crm.setMode(crmNormal)
	type answer struct {
		status int
		out    map[string]any
	}
	first := make(chan answer, 1)
	go func() {
		status, out := r.deliver(t, nodePath, id)
		first <- answer{status, out}
	}()
	eventually(t, time.Minute, "the first run's claim", func() string {
		if e, ok := r.svc.event(t, "shop", id); !ok || e.Status != "processing" {
			return "not claimed yet"
		}
		return ""
	})
	status, out := r.deliver(t, nodePath, id)
	if status != http.StatusOK || out["decision"] != "in_progress" || out["duplicate"] != true {
		t.Errorf("the redelivery was answered %d %v, want in_progress through Skip", status, out)
	}
	if a := <-first; a.status != http.StatusOK || a.out["outcome"] != "done" {
		t.Errorf("the first run was answered %d %v", a.status, a.out)
	}
	r.oneOrder(t, "shop", id)
	if e := r.ledger(t, "shop", id); e.Status != "done" || strings.Join(e.decisions(), ",") != "claimed,in_progress" {
		t.Errorf("ledger: %s %v", e.Status, e.decisions())
	}
}

// nodeRetry: the CRM creates the order and never answers, so the CRM step
// fails the execution; a person presses Retry, which resumes at the CRM
// step (the Claim node's output, with its run stamp, is replayed) and
// reports done through the node's Report outcome, as the Retry.
func (r *run) nodeRetry(t *testing.T, workflowID string) {
	id := r.newID()
	r.crm.setMode(crmHang)
	status, out := r.deliver(t, nodePath, id)
	r.crm.setMode(crmNormal)
	if status != http.StatusInternalServerError {
		t.Fatalf("the sender was answered %d %v; a failed run answers 500; %s", status, out, r.n8n.lastRun(t, workflowID))
	}
	if _, ok := r.crm.order("shop:" + id); !ok {
		t.Fatalf("the hanging CRM did not create the order; %s", r.n8n.lastRun(t, workflowID))
	}
	holder := r.ledger(t, "shop", id).HolderExecutionID
	if x := r.n8n.waitExecution(t, holder); x.Status != "error" {
		t.Fatalf("n8n lists execution %s as %s; an unknown outcome must fail it", holder, x.Status)
	}
	if e := r.ledger(t, "shop", id); e.Status != "processing" {
		t.Fatalf("before the Retry the entry is %s, want processing", e.Status)
	}
	creates := r.crm.createCount()
	x := r.n8n.retry(t, holder)
	if x.Mode != "retry" || x.RetryOf != holder || x.Status != "success" {
		t.Fatalf("the retry is %+v, want a successful retry of %s; %s", x, holder, r.n8n.lastRun(t, workflowID))
	}
	if n := r.crm.createCount() - creates; n != 0 {
		t.Errorf("the retry sent %d creates for an order the CRM had", n)
	}
	o := r.oneOrder(t, "shop", id)
	e := r.ledger(t, "shop", id)
	if e.Status != "done" || e.CRMRef != o.ID {
		t.Errorf("after the retry the entry is %s with crm_ref %q, want done with %s", e.Status, e.CRMRef, o.ID)
	}
	r.doneByRetry(t, e, x.ID, holder)
	// n8n's Retry copies the custom data of the execution it retries: a
	// Retry whose Claim node runs again presents the holder's stamp.
	if got, want := r.n8n.customData(t, x.ID), r.n8n.customData(t, holder); got["retryaudit_run_stamp"] == "" ||
		got["retryaudit_run_stamp"] != want["retryaudit_run_stamp"] {
		t.Errorf("the Retry's custom data is %v, the holder's %v: n8n no longer copies it into a Retry", got, want)
	}
}

// nodeServiceDown: retryaudit does not answer while the Claim runs; the
// node tries a bounded number of times and fails the item, naming the
// service, so the execution fails before the CRM step. Once retryaudit is
// back, a Retry runs the Claim again with the failed execution's run stamp
// (from the custom data n8n's Retry copies) and the order is made once.
func (r *run) nodeServiceDown(t *testing.T, workflowID string) {
	id := r.newID()
	r.svc.stop(t)
	status, out := r.deliver(t, nodePath, id)
	r.svc = r.svc.restart(t, r.t)
	if status != http.StatusInternalServerError {
		t.Fatalf("with retryaudit down the sender was answered %d %v, want 500", status, out)
	}
	if _, ok := r.crm.order("shop:" + id); ok {
		t.Fatal("the CRM got the order although nothing was claimed")
	}
	var page struct {
		Data []execution `json:"data"`
	}
	r.n8n.api(t, "GET", "/executions?status=error&limit=1&workflowId="+workflowID, nil, http.StatusOK, &page)
	if len(page.Data) == 0 {
		t.Fatalf("n8n lists no failed execution; %s", r.n8n.lastRun(t, workflowID))
	}
	failed := page.Data[0]
	if last := r.n8n.lastRun(t, workflowID); !strings.Contains(last, `error in "Claim event": retryaudit at `+r.serviceURL+
		" did not answer POST /v1/claims in 5 tries") {
		t.Errorf("the failed execution says: %s", last)
	}
	stamp := r.n8n.customData(t, failed.ID)["retryaudit_run_stamp"]
	x := r.n8n.retry(t, failed.ID)
	if x.Status != "success" || x.RetryOf != failed.ID {
		t.Fatalf("the retry is %+v; %s", x, r.n8n.lastRun(t, workflowID))
	}
	r.oneOrder(t, "shop", id)
	e := r.ledger(t, "shop", id)
	if e.Status != "done" || strings.Join(e.decisions(), ",") != "claimed" {
		t.Errorf("ledger: %s %v", e.Status, e.decisions())
	}
	if got := r.n8n.customData(t, x.ID)["retryaudit_run_stamp"]; stamp == "" || !strings.HasPrefix(stamp, failed.ID+":") || got != stamp {
		t.Errorf("the failed execution's stamp is %q, the Retry's %q: the Retry must present the one it replays", stamp, got)
	}
}

func (r *run) nodeRefusedThenReclaimed(t *testing.T) {
	id := r.newID()
	r.crm.setMode(crm422)
	status, out := r.deliver(t, nodePath, id)
	r.crm.setMode(crmNormal)
	if status != http.StatusServiceUnavailable || out["outcome"] != "failed" {
		t.Fatalf("a refused order was answered %d %v, want 503 failed", status, out)
	}
	if e := r.ledger(t, "shop", id); e.Status != "failed" {
		t.Fatalf("after the refusal the entry is %s", e.Status)
	}
	status, out = r.deliver(t, nodePath, id)
	if status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("the redelivery was answered %d %v", status, out)
	}
	r.oneOrder(t, "shop", id)
	if e := r.ledger(t, "shop", id); e.Status != "done" || strings.Join(e.decisions(), ",") != "claimed,reclaimed" {
		t.Errorf("ledger: %s %v", e.Status, e.decisions())
	}
}
