//go:build n8n

package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildService builds retryaudit into a temporary folder.
func buildService(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "retryaudit")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/retryaudit")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// service is retryaudit serve, started from its binary as a user runs it.
type service struct {
	URL      string
	Token    string
	Password string // of the pages' user admin
	env      map[string]string
	cmd      *exec.Cmd
	log      *lockedBuffer
	exited   chan error
}

var servingLine = regexp.MustCompile(`serving on (http://\S+)`)

// startService runs the binary with env until stop (or the test's end).
func startService(t *testing.T, bin string, env map[string]string) *service {
	t.Helper()
	return launchService(t, t, bin, env)
}

// launchService starts the service for t; it stops at owner's end.
func launchService(t, owner *testing.T, bin string, env map[string]string) *service {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &service{Token: env["RETRYAUDIT_TOKEN"], env: env, cmd: cmd, log: logs, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	owner.Cleanup(func() { s.stop(owner) })
	deadline := time.Now().Add(time.Minute)
	for s.URL == "" {
		select {
		case err := <-s.exited:
			t.Fatalf("retryaudit exited at start (%v):\n%s", err, logs.String())
		default:
		}
		if m := servingLine.FindStringSubmatch(logs.String()); m != nil {
			s.URL = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("retryaudit did not start within a minute:\n%s", logs.String())
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	pw, err := os.ReadFile(filepath.Join(env["RETRYAUDIT_DATA_DIR"], "ui-password"))
	if err != nil {
		t.Fatalf("the pages' password: %v", err)
	}
	s.Password = strings.TrimSpace(string(pw))
	return s
}

// stopLimit is how long stop waits after SIGTERM: as long as the systemd
// unit does (serve drains requests for up to 30 s, then ends its jobs).
const stopLimit = 45 * time.Second

// stop ends the service with SIGTERM, as systemd does, and waits for it.
func (s *service) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	began := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopLimit):
		// SIGQUIT: the Go runtime prints every goroutine to the log,
		// which then says what the drain waited for.
		s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
		t.Errorf("retryaudit did not stop within %s of SIGTERM", stopLimit)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Logf("retryaudit took %s to stop; its last lines:\n%s", took.Round(100*time.Millisecond), s.log.tail(10))
	}
	if t.Failed() {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("retryaudit-e2e-service-%d.log", s.cmd.Process.Pid))
		os.WriteFile(path, []byte(s.log.String()), 0o644)
		t.Logf("retryaudit's log: %s", path)
	}
}

// restart stops the service and starts it again on its data, until
// owner's end.
func (s *service) restart(t, owner *testing.T) *service {
	t.Helper()
	s.stop(t)
	return launchService(t, owner, s.cmd.Path, s.env)
}

// ledgerEvent is an event as GET /v1/events/{source}/{event_id} returns it.
type ledgerEvent struct {
	Source            string        `json:"source"`
	EventID           string        `json:"event_id"`
	Status            string        `json:"status"`
	NeedsReview       bool          `json:"needs_review"`
	ReviewReason      string        `json:"review_reason"`
	HolderExecutionID string        `json:"holder_execution_id"`
	Deliveries        int           `json:"deliveries"`
	CRMRef            string        `json:"crm_ref"`
	IdempotencyKey    string        `json:"idempotency_key"`
	History           []historyLine `json:"history"`
	Executions        []struct {
		ExecutionID string `json:"execution_id"`
		Mode        string `json:"mode"`
		RetryOf     string `json:"retry_of"`
		Role        string `json:"role"`
		N8NURL      string `json:"n8n_url"`
		DeliveryID  string `json:"delivery_id"`
	} `json:"executions"`
	Errors []struct {
		Kind        string `json:"kind"`
		ExecutionID string `json:"execution_id"`
		Node        string `json:"node"`
		Message     string `json:"message"`
	} `json:"errors"`
	Alerts []struct {
		Kind  string `json:"kind"`
		State string `json:"state"`
	} `json:"alerts"`
}

// historyLine is a line of an event's history.
type historyLine struct {
	ID          int64  `json:"id"`
	Kind        string `json:"kind"`
	ExecutionID string `json:"execution_id"`
	RetryOf     string `json:"retry_of"`
	Decision    string `json:"decision"`
	Delivery    string `json:"delivery"`
	Status      string `json:"status"`
	Message     string `json:"message"`
}

// decisions returns the claims' decisions in the order they were made
// (whatever order the API lists the history in).
func (e ledgerEvent) decisions() []string {
	history := slices.Clone(e.History)
	slices.SortFunc(history, func(a, b historyLine) int { return cmp.Compare(a.ID, b.ID) })
	var out []string
	for _, h := range history {
		if h.Kind == "claim" {
			out = append(out, h.Decision)
		}
	}
	return out
}

// event reads an event from the ledger over /v1 (ok false on 404).
func (s *service) event(t *testing.T, source, eventID string) (ledgerEvent, bool) {
	t.Helper()
	status, raw := do(t, http.DefaultClient, "GET", s.URL+"/v1/events/"+url.PathEscape(source)+"/"+url.PathEscape(eventID),
		map[string]string{"Authorization": "Bearer " + s.Token}, nil)
	if status == http.StatusNotFound {
		return ledgerEvent{}, false
	}
	if status != http.StatusOK {
		t.Fatalf("GET /v1/events/%s/%s: %d %s", source, eventID, status, raw)
	}
	var e ledgerEvent
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e, true
}

// page fetches one of the audit pages as the user admin.
func (s *service) page(t *testing.T, path string) (int, string) {
	t.Helper()
	u := path
	if !strings.HasPrefix(path, "http") {
		u = s.URL + path
	}
	req, _ := http.NewRequest("GET", u, nil)
	req.SetBasicAuth("admin", s.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventPage is the audit row of an event.
func (s *service) eventPage(t *testing.T, source, eventID string) string {
	t.Helper()
	status, body := s.page(t, "/events/"+url.PathEscape(source)+"/"+url.PathEscape(eventID))
	if status != http.StatusOK {
		t.Fatalf("the audit row of %s/%s answered %d", source, eventID, status)
	}
	return body
}

// eventually polls cond (every 100 ms) until it returns "" or limit passes,
// then fails with what cond said last. The limit is what the work may take
// (an n8n execution, a reconciliation pass, the outbox), not a guess.
func eventually(t *testing.T, limit time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for {
		if last = cond(); last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %s: %s", what, limit, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
