package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/n8n/n8ntest"
)

// elsewhere is another host (127.0.0.2 on Linux's loopback) that a
// redirect points to: it keeps every request that reaches it.
type elsewhere struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newElsewhere(t *testing.T) *elsewhere {
	t.Helper()
	e := &elsewhere{}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.seen = append(e.seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization")+
			" key="+r.Header.Get("X-N8N-API-KEY")+" body="+string(body))
		e.mu.Unlock()
		io.WriteString(w, `{"status":"ready","data":{"scopes":[]}}`)
	}))
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		e.Listener.Close()
		e.Listener = l
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

func (e *elsewhere) received() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

// redirecting answers paths it is given itself and redirects every other
// request, with status, to the same path at target.
func redirecting(t *testing.T, status int, target string, answers map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := answers[r.URL.Path]; ok {
			io.WriteString(w, a)
			return
		}
		http.Redirect(w, r, target+r.URL.RequestURI(), status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHealthcheckFollowsNoRedirect: a 3xx is not ready, whatever answers
// where it points, and nothing is asked there.
func TestHealthcheckFollowsNoRedirect(t *testing.T) {
	other := newElsewhere(t)
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusMovedPermanently} {
		srv := redirecting(t, status, other.URL, nil)
		var out bytes.Buffer
		err := run(context.Background(), []string{"healthcheck"},
			env(map[string]string{"RETRYAUDIT_ADDR": strings.TrimPrefix(srv.URL, "http://")}), &out)
		if err == nil || !strings.Contains(err.Error(), "not ready") || !strings.Contains(err.Error(), fmt.Sprintf("answered %d", status)) {
			t.Errorf("a %d: %v (%s)", status, err, out.String())
		}
	}
	if got := other.received(); len(got) != 0 {
		t.Errorf("healthcheck followed a redirect: %q", got)
	}
}

// TestConnectSendsNoSecretElsewhere: connect refuses a redirect to another
// host from the service (which it sends the token) and from n8n (which it
// sends the key, and the token in a credential's body), and says so.
func TestConnectSendsNoSecretElsewhere(t *testing.T) {
	f := n8ntest.NewFake(t)
	dir := t.TempDir()
	base := connectEnv(f, dir)
	svc := startService(t, base)
	other := newElsewhere(t)
	with := func(changes map[string]string) map[string]string {
		e := map[string]string{"RETRYAUDIT_BASE_URL": svc.URL}
		for k, v := range base {
			e[k] = v
		}
		for k, v := range changes {
			e[k] = v
		}
		return e
	}
	// A service that answers ready, then redirects the call with the token.
	service := redirecting(t, http.StatusTemporaryRedirect, other.URL, map[string]string{"/readyz": `{"status":"ready"}`})
	n8nAPI := redirecting(t, http.StatusTemporaryRedirect, other.URL, nil).URL + "/api/v1"
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"the service redirects the call with the token", with(map[string]string{"RETRYAUDIT_BASE_URL": service.URL}), nil},
		{"the service's own n8n API redirects", with(map[string]string{"RETRYAUDIT_N8N_API_URL": n8nAPI}), nil},
		{"the n8n API to wire redirects", with(nil), []string{"--n8n-url", n8nAPI}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runConnect(t, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), "refused to follow a redirect to another address") ||
				!strings.Contains(err.Error(), other.URL) {
				t.Errorf("err = %v, want the refusal naming %s\n%s", err, other.URL, out)
			}
		})
	}
	if got := other.received(); len(got) != 0 {
		t.Errorf("the other host received %q", got)
	}
	if m := f.Mutations(); len(m) != 0 {
		t.Errorf("a refused connect wrote %v", m)
	}
}

// TestConnectPrintsNoEscapeCodes: an n8n whose answers hold escape codes
// that clear the screen and print a fake "ok" line reaches neither
// connect's output nor its error with them, and its words are cut.
func TestConnectPrintsNoEscapeCodes(t *testing.T) {
	f := n8ntest.NewFake(t)
	env := connectEnv(f, t.TempDir())
	svc := startService(t, env)
	env["RETRYAUDIT_BASE_URL"] = svc.URL
	const fakeOK = "\x1b[2J\x1b[3J\x1b[H\x1b]2;retryaudit\x07\r\nok    n8n API        wired, nothing to do\n"
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"message": fakeOK + strings.Repeat("\x1b[1A\x1b[2K", 500)})
	}))
	defer evil.Close()
	out, err := runConnect(t, env, "--n8n-url", evil.URL+"/api/v1")
	if err == nil {
		t.Fatalf("connect passed:\n%s", out)
	}
	printed := out + "retryaudit: " + err.Error() + "\n"
	if strings.ContainsAny(printed, "\x1b\r\a\u009b") || len(err.Error()) > 600 {
		t.Errorf("connect printed %d bytes of error: %q", len(err.Error()), printed)
	}
	for _, line := range strings.Split(printed, "\n") {
		if strings.HasPrefix(line, "ok    n8n API") {
			t.Errorf("n8n printed a line of its own: %q", line)
		}
	}
}

// TestServeLogsN8NDownOnce: with n8n's API down, reconciliation passes and
// lookups log one WARN line between them, and the job loop none of its own.
func TestServeLogsN8NDownOnce(t *testing.T) {
	gone := "http://" + freeAddr(t) + "/api/v1" // nothing listens there
	svc := startService(t, map[string]string{"RETRYAUDIT_N8N_API_URL": gone, "RETRYAUDIT_N8N_API_KEY": "k",
		"RETRYAUDIT_N8N_POLL": "100ms"})
	// The first pass only notes where n8n stands; a few more fail.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(svc.Output.String(), "n8n's API unreachable") {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // ten more passes
	var warns []string
	for _, line := range strings.Split(svc.Output.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "n8n") {
			warns = append(warns, line)
		}
	}
	t.Log(strings.Join(warns, "\n"))
	if len(warns) != 1 || !strings.Contains(warns[0], `msg="n8n's API unreachable: the service goes on without it`) ||
		!strings.Contains(warns[0], "n8n_instance=default") {
		t.Errorf("%d WARN lines about n8n, want one:\n%s", len(warns), strings.Join(warns, "\n"))
	}
}
