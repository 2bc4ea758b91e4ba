package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServe: a request log line per request without the token (a wrong
// token's line is the guard's), metrics on their own listener, and a clean
// stop.
func TestServe(t *testing.T) {
	const token = "s3cr3t-t0ken-never-logged-9f3c1a7e5b2d"
	metrics := freeAddr(t)
	svc := startService(t, map[string]string{"RETRYAUDIT_TOKEN": token, "RETRYAUDIT_METRICS_ADDR": metrics})
	if code, body := svc.api(t, "POST", "/v1/claims", `{"source":"shop","event_id":"o-1","execution_id":"1","workflow_id":"wf1"}`); code != 200 {
		t.Fatalf("claim: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", svc.URL+"/v1/claims", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token+"-wrong")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("metrics listener: %d", resp.StatusCode)
	}
	if resp, err := http.Get(svc.URL + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("/metrics is also on the main listener")
		}
	}
	svc.stop()
	out := svc.Output.String()
	if strings.Contains(out, token) {
		t.Errorf("the token is in the output:\n%s", out)
	}
	// A wrong token has the guard's line, not a request line.
	for _, want := range []string{"route=/v1/claims", "status=200", "decision=claimed", `msg="wrong token"`, "latency=", "stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// TestGeneratedSecretsStayOutOfTheLog: serve's output here is no terminal
// (as under systemd, where it is the journal): the generated token and
// password are not printed, the output says which file holds each, and the
// files and the SQLite database are readable by the owner only.
func TestGeneratedSecretsStayOutOfTheLog(t *testing.T) {
	svc := startService(t, nil)
	checkModes(t, svc.DataDir) // while the database is open: its -wal and -shm exist
	svc.stop()
	out := svc.Output.String()
	if svc.Token == "" || svc.HookToken == "" || svc.Password == "" {
		t.Fatalf("no generated token, hook token or password in %s", svc.DataDir)
	}
	for name, secret := range map[string]string{"token": svc.Token, "hook token": svc.HookToken, "password": svc.Password} {
		if strings.Contains(out, secret) {
			t.Errorf("the generated %s is in the output:\n%s", name, out)
		}
	}
	for _, file := range []string{"token", "hook-token", "ui-password"} {
		if !strings.Contains(out, filepath.Join(svc.DataDir, file)) {
			t.Errorf("the output does not say that %s holds a secret:\n%s", file, out)
		}
	}
}

func checkModes(t *testing.T, dir string) {
	t.Helper()
	for _, file := range []string{"token", "hook-token", "ui-password", "retryaudit.db", "retryaudit.db-wal", "retryaudit.db-shm"} {
		st, err := os.Stat(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %o, want 600", file, perm)
		}
	}
}

// TestEveryStartSaysWhereSecretsAre: a start that finds the generated
// token, hook token and password from an earlier one says which files hold
// them, and prints none of them.
func TestEveryStartSaysWhereSecretsAre(t *testing.T) {
	dir := t.TempDir()
	first := startService(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir})
	first.stop()
	second := startService(t, map[string]string{"RETRYAUDIT_DATA_DIR": dir})
	second.stop()
	out := second.Output.String()
	if strings.Contains(out, "generated") {
		t.Errorf("the second start generated a secret:\n%s", out)
	}
	for file, secret := range map[string]string{"token": first.Token, "hook-token": first.HookToken, "ui-password": first.Password} {
		if !strings.Contains(out, "kept in "+filepath.Join(dir, file)) {
			t.Errorf("the second start does not say that %s holds a secret:\n%s", file, out)
		}
		if secret == "" || strings.Contains(out, secret) {
			t.Errorf("%s: %q printed or missing:\n%s", file, secret, out)
		}
	}
}
