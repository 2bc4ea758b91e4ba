package main

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/lib/pq" // the PostgreSQL driver
)

// The tests that put PgBouncer in front of PostgreSQL or fail a primary over
// start PostgreSQL clusters of their own: initdb in a temporary folder, on
// ports of their own on 127.0.0.1, stopped and removed when the test ends.
// The machine's own cluster is never touched. They need Debian's PostgreSQL
// server (/usr/lib/postgresql/<version>/bin) and pgbouncer; without them
// they skip, or fail when RETRYAUDIT_TEST_REQUIRE_CLUSTER=1 (make test).

// pgTools are the programs a test cluster needs and the user that runs
// them: the test's own, or postgres when the test runs as root (initdb and
// pgbouncer refuse root).
type pgTools struct {
	bin       string // PostgreSQL's bin folder: initdb, pg_ctl, pg_basebackup
	pgbouncer string // "" unless asked for
	cred      *syscall.Credential
}

// needClusters finds the tools, or skips the test (fails it when
// RETRYAUDIT_TEST_REQUIRE_CLUSTER=1).
func needClusters(t *testing.T, withPgBouncer bool) pgTools {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv("RETRYAUDIT_TEST_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("%s is required (RETRYAUDIT_TEST_REQUIRE_CLUSTER=1) but was not found", what)
		}
		t.Skipf("no %s: apt-get install postgresql pgbouncer", what)
	}
	var tools pgTools
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(bins, func(a, b string) int { return pgVersion(a) - pgVersion(b) })
	if len(bins) == 0 {
		missing("PostgreSQL's server (/usr/lib/postgresql/*/bin/initdb)")
	}
	tools.bin = filepath.Dir(bins[len(bins)-1])
	if withPgBouncer {
		p, err := exec.LookPath("pgbouncer")
		if err != nil {
			p = "/usr/sbin/pgbouncer" // not on a user's PATH
			if _, err := os.Stat(p); err != nil {
				missing("pgbouncer")
			}
		}
		tools.pgbouncer = p
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			missing("the user postgres (the test runs as root, and PostgreSQL refuses root)")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		tools.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return tools
}

// pgVersion reads the version out of /usr/lib/postgresql/<version>/bin/initdb.
func pgVersion(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// dir makes a temporary folder the tools' user owns, removed when the test
// ends (t.TempDir is the test user's and closed to others).
func (p pgTools) dir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "retryaudit-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if p.cred != nil {
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// command returns name run as the tools' user, in its own process group, so
// that a signal to the test's group (Ctrl-C) does not stop it before the
// test's cleanup does.
func (p pgTools) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// run runs a PostgreSQL program and fails the test with its output.
func (p pgTools) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := p.command(filepath.Join(p.bin, name), args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// pgCluster is one PostgreSQL server of the test's.
type pgCluster struct {
	tools pgTools
	name  string
	dir   string // the folder with data/, the log and the socket
	Port  int
}

// startCluster initdbs a cluster and starts it. extra are settings (-c
// name=value) for the server's command line.
func startCluster(t *testing.T, tools pgTools, name string, extra ...string) *pgCluster {
	t.Helper()
	c := &pgCluster{tools: tools, name: name, dir: tools.dir(t), Port: freeTCPPort(t)}
	tools.run(t, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	c.start(t, extra...)
	return c
}

// startReplica takes a base backup of primary (pg_basebackup -R: a standby
// that streams from it) and starts it on a port of its own.
func startReplica(t *testing.T, primary *pgCluster, name string) *pgCluster {
	t.Helper()
	c := &pgCluster{tools: primary.tools, name: name, dir: primary.tools.dir(t), Port: freeTCPPort(t)}
	c.tools.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", c.data(), "-R", "-X", "stream", "-c", "fast", "--no-sync")
	c.start(t)
	return c
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// start starts the server, stopped at once when the test ends.
func (c *pgCluster) start(t *testing.T, extra ...string) {
	t.Helper()
	opts := []string{"-p " + strconv.Itoa(c.Port), "-k " + c.dir, "-c listen_addresses=127.0.0.1",
		"-c shared_buffers=16MB", "-c max_connections=60"}
	for _, e := range extra {
		opts = append(opts, "-c "+e)
	}
	c.tools.run(t, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60",
		"-o", strings.Join(opts, " "), "start")
	t.Cleanup(func() {
		c.tools.command(filepath.Join(c.tools.bin, "pg_ctl"), "-D", c.data(), "-m", "immediate", "-w", "stop").Run()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
			t.Logf("%s's log:\n%s", c.name, tail(string(log), 40))
		}
	})
}

// stop stops the server: mode fast (a clean shutdown) or immediate (as if it
// crashed).
func (c *pgCluster) stop(t *testing.T, mode string) {
	t.Helper()
	c.tools.run(t, "pg_ctl", "-D", c.data(), "-m", mode, "-w", "stop")
}

// promote makes a standby a primary and waits until it takes writes.
func (c *pgCluster) promote(t *testing.T) {
	t.Helper()
	c.tools.run(t, "pg_ctl", "-D", c.data(), "-w", "promote")
}

// URL is the URL of database db on the cluster, straight to it.
func (c *pgCluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// exec runs statements on database db.
func (c *pgCluster) exec(t *testing.T, db, query string, args ...any) {
	t.Helper()
	conn := c.open(t, db)
	defer conn.Close()
	if _, err := conn.Exec(query, args...); err != nil {
		t.Fatalf("%s: %s: %v", c.name, query, err)
	}
}

// open connects to database db straight, for the test's own statements.
func (c *pgCluster) open(t *testing.T, db string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("postgres", c.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// pgBouncer is a PgBouncer of the test's in front of one cluster.
type pgBouncer struct {
	Port int
	Mode string
}

// startPgBouncer starts pgbouncer in front of c with pool_mode mode and a
// small pool (3 server connections a database, for up to 200 clients), so
// that clients share server connections as a busy installation's do. It is
// killed when the test ends.
func startPgBouncer(t *testing.T, c *pgCluster, mode string) *pgBouncer {
	t.Helper()
	dir := c.tools.dir(t)
	b := &pgBouncer{Port: freeTCPPort(t), Mode: mode}
	users := filepath.Join(dir, "users.txt")
	ini := filepath.Join(dir, "pgbouncer.ini")
	conf := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = 3
max_client_conn = 200
logfile = %s
`, c.Port, b.Port, users, mode, filepath.Join(dir, "pgbouncer.log"))
	for name, text := range map[string]string{users: `"postgres" ""` + "\n", ini: conf} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := c.tools.command(c.tools.pgbouncer, ini)
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Logf("pgbouncer's log:\n%s", tail(string(log), 40))
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port), time.Second)
		if err == nil {
			conn.Close()
			return b
		}
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer ended at start: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer does not listen on %d: %v", b.Port, err)
		}
	}
}

// URL is the URL of database db through PgBouncer, with retryaudit's option
// for transaction pooling.
func (b *pgBouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&pgbouncer=true", b.Port, db)
}

// freeTCPPort returns a port free on 127.0.0.1 a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
