package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// service is retryaudit serve, run in the test's process as main would run
// it.
type service struct {
	URL       string
	DataDir   string
	Token     string
	HookToken string
	Password  string
	Output    *output
	stop      func()
}

// output collects what the service prints and finds the line that says
// where it serves.
type output struct {
	mu   sync.Mutex
	b    strings.Builder
	urls chan string
	sent bool
}

var servingLine = regexp.MustCompile(`serving on (http://\S+)`)

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	if m := servingLine.FindStringSubmatch(o.b.String()); m != nil && !o.sent {
		o.sent = true
		o.urls <- m[1]
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// startService runs serve with env (RETRYAUDIT_ADDR defaults to a free
// port, RETRYAUDIT_DATA_DIR to a temporary folder) until the test ends.
func startService(t *testing.T, env map[string]string) *service {
	t.Helper()
	dir := t.TempDir()
	// A busy machine makes the service slower, not wrong: the waits that
	// answer 503 when they run out take the test's patience (tests of
	// those answers set their own).
	wait := audittest.Patience(t).String()
	vars := map[string]string{"RETRYAUDIT_ADDR": "127.0.0.1:0", "RETRYAUDIT_DATA_DIR": dir,
		"RETRYAUDIT_API_TIMEOUT": wait, "RETRYAUDIT_QUEUE_WAIT": wait, "RETRYAUDIT_DB_LOCK_TIMEOUT": wait}
	for k, v := range env {
		vars[k] = v
	}
	if vars["RETRYAUDIT_DATA_DIR"] != dir {
		dir = vars["RETRYAUDIT_DATA_DIR"]
	}
	out := &output{urls: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, func(k string) string { return vars[k] }, out) }()
	s := &service{DataDir: dir, Output: out}
	var once sync.Once
	s.stop = func() { once.Do(func() { stopService(t, cancel, done) }) }
	select {
	case s.URL = <-out.urls:
	case err := <-done:
		t.Fatalf("serve ended at start: %v\n%s", err, out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", out.String())
	}
	t.Cleanup(s.stop)
	s.Token = readSecret(t, filepath.Join(dir, "token"), env["RETRYAUDIT_TOKEN"])
	s.HookToken = readSecret(t, filepath.Join(dir, "hook-token"), env["RETRYAUDIT_HOOK_TOKEN"])
	s.Password = readSecret(t, filepath.Join(dir, "ui-password"), "")
	return s
}

// stopService ends serve's context and waits for it to return.
func stopService(t *testing.T, cancel func(), done <-chan error) {
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop within 30s of its context ending")
	}
}

func readSecret(t *testing.T, path, given string) string {
	t.Helper()
	if given != "" {
		return given
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// api calls the service's /v1 API with its token.
func (s *service) api(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}
