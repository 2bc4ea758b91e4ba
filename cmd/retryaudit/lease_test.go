package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// TestMain lets a test run this binary as retryaudit itself
// (RETRYAUDIT_TEST_CHILD=serve), so that it can kill an instance as the
// kernel would, with no chance to clean up.
func TestMain(m *testing.M) {
	if os.Getenv("RETRYAUDIT_TEST_CHILD") == "serve" {
		os.Args = []string{"retryaudit", "serve"}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// listCounter is an n8n API that answers every list of failed executions
// with none, and remembers when it was asked.
type listCounter struct {
	mu    sync.Mutex
	lists []time.Time
}

func newListCounter(t *testing.T) (*listCounter, string) {
	l := &listCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/executions" {
			l.mu.Lock()
			l.lists = append(l.lists, time.Now())
			l.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":[],"nextCursor":null}`)
	}))
	t.Cleanup(srv.Close)
	return l, srv.URL + "/api/v1"
}

// since returns when the API was first asked after t (zero if not yet).
func (l *listCounter) since(t time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.lists {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// child is retryaudit serve in a process of its own.
type child struct {
	cmd *exec.Cmd
	out *output
}

func startChild(t *testing.T, env map[string]string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RETRYAUDIT_TEST_CHILD=serve", "RETRYAUDIT_ADDR=127.0.0.1:0",
		"RETRYAUDIT_DATA_DIR="+t.TempDir())
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &output{urls: make(chan string, 1)}
	c := &child{cmd: cmd, out: out}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	select {
	case <-out.urls:
	case <-time.After(60 * time.Second):
		t.Fatalf("the child instance did not start:\n%s", out.String())
	}
	return c
}

// holder returns the pid in the owner of the named lease while it is
// valid (0 when nobody holds it).
func holder(t *testing.T, db *sqlx.DB, name string) int {
	t.Helper()
	var owner string
	err := db.Get(&owner, `SELECT owner FROM job_leases WHERE name = $1 AND lease_until > now()`, name)
	if err != nil {
		return 0
	}
	parts := strings.Split(owner, "-")
	var pid int
	fmt.Sscan(parts[len(parts)-2], &pid)
	return pid
}

// waitFor polls cond until it holds or limit passes; it returns when it
// held (zero if it never did).
func waitFor(limit time.Duration, cond func() bool) time.Time {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if cond() {
			return time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}
}

// TestLeaseTakeover runs reconciliation on instances sharing one
// PostgreSQL database: one holds the job's lease and the other waits; when
// the holder is killed (SIGKILL: it releases nothing) another instance
// takes the job over and runs it within one interval; when the holder stops
// cleanly it releases the lease and another takes over at once.
func TestLeaseTakeover(t *testing.T) {
	url := audittest.URL(t, "postgres")
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const interval = 10 * time.Second
	_, renew := leaseFor(interval)
	env := func(api string) map[string]string {
		return map[string]string{"RETRYAUDIT_DATABASE_URL": url, "RETRYAUDIT_TOKEN": tok("shared-token"),
			"RETRYAUDIT_N8N_POLL": interval.String(), "RETRYAUDIT_N8N_API_URL": api, "RETRYAUDIT_N8N_API_KEY": "k"}
	}
	_, urlA := newListCounter(t)
	apiB, urlB := newListCounter(t)
	apiC, urlC := newListCounter(t)

	a := startChild(t, env(urlA))
	if waitFor(interval, func() bool { return holder(t, db, "reconcile") == a.cmd.Process.Pid }).IsZero() {
		t.Fatalf("the first instance did not take the reconcile lease within %s", interval)
	}
	b := startService(t, env(urlB))
	time.Sleep(3 * renew)
	if at := apiB.since(time.Time{}); !at.IsZero() {
		t.Fatal("the second instance reconciled while the first held the lease")
	}

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	a.cmd.Wait()
	took := waitFor(2*interval, func() bool { return !apiB.since(killed).IsZero() })
	if took.IsZero() {
		t.Fatalf("no instance reconciled within %s of the holder's kill", 2*interval)
	}
	if d := apiB.since(killed).Sub(killed); d > interval {
		t.Errorf("the surviving instance took reconciliation over %s after the kill, more than one interval (%s)",
			d.Round(time.Millisecond), interval)
	} else {
		t.Logf("taken over %s after the kill (interval %s)", d.Round(time.Millisecond), interval)
	}
	if got := holder(t, db, "reconcile"); got != os.Getpid() {
		t.Errorf("the lease is held by pid %d, want the surviving instance (%d)", got, os.Getpid())
	}

	c := startChild(t, env(urlC))
	time.Sleep(3 * renew)
	if !apiC.since(time.Time{}).IsZero() {
		t.Fatal("a third instance reconciled while the second held the lease")
	}
	b.stop()
	stopped := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			c.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, in its output: where it waits
			time.Sleep(time.Second)
			t.Logf("the stopped instance said:\n%s\nthe third instance said:\n%s", b.Output.String(), c.out.String())
		}
	})
	// Released, not left to run out: taken at the next try.
	taken := waitFor(interval, func() bool { return holder(t, db, "reconcile") == c.cmd.Process.Pid })
	if taken.IsZero() {
		t.Fatalf("the third instance did not take the released lease within %s of the holder's clean stop", interval)
	}
	if d := taken.Sub(stopped); d > renew+time.Second {
		t.Errorf("taken over %s after a clean stop; a released lease is taken at the next try (%s)", d, renew)
	}
	// And the job runs at once on the new holder; how long its first pass
	// takes to reach n8n is the busy machine's, not the lease's.
	if waitFor(2*interval, func() bool { return !apiC.since(stopped).IsZero() }).IsZero() {
		t.Fatalf("the third instance took the lease but did not reconcile within %s", 2*interval)
	}
	if got := holder(t, db, "reconcile"); got != c.cmd.Process.Pid {
		t.Errorf("the lease is held by pid %d, want the third instance (%d)", got, c.cmd.Process.Pid)
	}
}
