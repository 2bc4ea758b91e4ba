//go:build n8n

package e2e

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/lib/pq" // n8n's database in queue mode

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// TestRealN8NQueue runs n8n the way larger installs do, in queue mode: a
// main process that takes webhooks and hands executions to a worker through
// Redis (Debian's redis-server), both on PostgreSQL and both with the hooks
// file. The control steps pass, and every execution's start and end reach
// the service once: the worker reports what it runs, the main process what
// it runs itself (manual executions).
func TestRealN8NQueue(t *testing.T) {
	began := time.Now()
	home := os.Getenv("RETRYAUDIT_TEST_N8N_HOME")
	if home == "" {
		t.Fatal("RETRYAUDIT_TEST_N8N_HOME is unset: run make test-n8n, which installs n8n and sets it")
	}
	s := &suite{crm: newFakeCRM(t), slack: newFakeSlack(t), bin: buildService(t), token: randomToken(),
		hookToken: randomToken(), extra: (*run).queueSteps}
	s.serviceURL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	s.tap = newHookTap(t, s.serviceURL)
	env := append(hooksEnv(t, s.tap, s.hookToken), "EXECUTIONS_MODE=queue", "N8N_ENCRYPTION_KEY="+randomToken(),
		"QUEUE_BULL_REDIS_HOST=127.0.0.1", fmt.Sprintf("QUEUE_BULL_REDIS_PORT=%d", startRedis(t)))
	env = append(env, n8nPostgres(t)...)
	s.n8n = startN8NWith(t, home, n8nConfig{Env: env})
	worker := startN8NWith(t, home, n8nConfig{Env: env, Command: "worker"})
	s.wire(t)
	s.wireHooks(t)
	if !strings.Contains(worker.log.String(), "retryaudit hooks: reporting execution starts and ends") {
		t.Fatalf("the worker did not load the hooks file; it printed:\n%s", worker.log.tail(40))
	}
	t.Logf("timing: n8n's main and worker started and wired in %s", time.Since(began).Round(time.Second))
	s.controlRun(t, "postgres")
	if !strings.Contains(worker.log.String(), "Worker finished execution") {
		t.Error("the worker ran no execution: is n8n in queue mode?")
	}
	t.Logf("timing: TestRealN8NQueue took %s", time.Since(began).Round(time.Second))
}

// queueSteps: in queue mode, two processes run the hooks file for each
// execution; its start and end must reach the service once each.
func (r *run) queueSteps() []step {
	since := time.Now()
	r.tap.reset()
	return []step{{"every execution reached the service through the hooks, its start and end once", func(t *testing.T) {
		throughHooks(t, r.n8n, r.tap, since, 2*time.Minute)
		time.Sleep(3 * time.Second) // a second copy would come from the main process a moment after the worker's
		throughHooks(t, r.n8n, r.tap, since, 0)
	}}}
}

// startRedis starts a redis-server of its own for the test, on a free port
// without persistence, and returns the port.
func startRedis(t *testing.T) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("queue mode needs Redis: apt-get install redis-server (make test-n8n installs it)")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir())
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "Ready to accept connections") {
		select {
		case err := <-exited:
			t.Fatalf("redis-server exited (%v):\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server was not ready within 30 s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return port
}

// n8nPostgres creates a PostgreSQL database for n8n, dropped at the test's
// end, and returns the variables that point n8n at it.
func n8nPostgres(t *testing.T) []string {
	t.Helper()
	admin, err := sql.Open("postgres", audittest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := "retryaudit_e2e_n8n_" + strings.ToLower(randomToken()[4:16])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("PostgreSQL for n8n (RETRYAUDIT_TEST_POSTGRES_URL): %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(audittest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	return []string{"DB_TYPE=postgresdb", "DB_POSTGRESDB_HOST=" + u.Hostname(), "DB_POSTGRESDB_PORT=" + port,
		"DB_POSTGRESDB_DATABASE=" + name, "DB_POSTGRESDB_USER=" + u.User.Username(), "DB_POSTGRESDB_PASSWORD=" + password}
}
