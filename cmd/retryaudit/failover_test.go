package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/store/postgres"
)

// TestFailover runs the service on a primary and a streaming replica of the
// test's own (pg_basebackup -R) through a URL that lists both, in lib/pq's
// form (?host=a,b&port=p,q&target_session_attrs=read-write) and in the form
// other drivers take (a:p,b:q in the host part; read-write is then the
// default), while clients claim new keys without a pause; the primary is stopped and the replica promoted, as an operator or
// Patroni would. Claims must resume within 10 s of the stop, every answer
// must be right or a 503 that says to send it again, and every claim
// answered must still hold its key on the new primary. Twice: a clean stop
// with an asynchronous replica, and a crash (pg_ctl stop -m immediate) with a
// synchronous one — with an asynchronous replica a crash may lose the last
// commits, which is PostgreSQL's, not the service's, to promise.
func TestFailover(t *testing.T) {
	tools := needClusters(t, false)
	for _, tc := range []struct {
		name, stop  string
		synchronous bool
		url         string // %d: the primary's port, then the replica's
	}{
		{"clean stop, asynchronous replica", "fast", false,
			"postgres://postgres@/retryaudit?host=127.0.0.1,127.0.0.1&port=%d,%d&target_session_attrs=read-write&sslmode=disable"},
		{"crash, synchronous replica", "immediate", true,
			"postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/retryaudit?sslmode=disable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := startCluster(t, tools, "primary")
			primary.exec(t, "postgres", "CREATE DATABASE retryaudit")
			replica := startReplica(t, primary, "replica")
			want := "async"
			if tc.synchronous {
				// Set after the base backup, so that the replica, once
				// promoted, does not wait for a standby of its own.
				primary.exec(t, "postgres", "ALTER SYSTEM SET synchronous_standby_names = '*'")
				primary.exec(t, "postgres", "SELECT pg_reload_conf()")
				want = "sync"
			}
			db := primary.open(t, "postgres")
			if waitFor(30*time.Second, func() bool {
				var state string
				db.QueryRow(`SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&state)
				return state == want
			}).IsZero() {
				t.Fatalf("the replica is not streaming (%s) within 30s", want)
			}
			db.Close()

			svc := startService(t, map[string]string{"RETRYAUDIT_DATABASE_URL": fmt.Sprintf(tc.url, primary.Port, replica.Port),
				"RETRYAUDIT_TOKEN": tok("failover-token"), "RETRYAUDIT_API_TIMEOUT": "10s"})
			c := &claimers{svc: svc, answers: map[string]answer{}}
			c.start(4)
			time.Sleep(2 * time.Second) // claims on the primary
			stopping := time.Now()
			primary.stop(t, tc.stop)
			down := time.Now() // a claim sent from now on is answered by the new primary, or not at all
			replica.promote(t)
			promoted := time.Now()
			resumed := waitFor(20*time.Second, func() bool { return !c.firstOKSentAfter(down).IsZero() })
			time.Sleep(2 * time.Second) // claims on the new primary
			c.stop()
			if resumed.IsZero() {
				t.Fatalf("no claim answered within 20s of the promotion (answers: %v)", c.counts())
			}
			back := c.firstOKSentAfter(down)
			t.Logf("claims resumed %s after the primary began to stop (the stop took %s, the promotion %s; "+
				"%s after the promotion); answers: %v", back.Sub(stopping).Round(10*time.Millisecond),
				down.Sub(stopping).Round(10*time.Millisecond), promoted.Sub(down).Round(10*time.Millisecond),
				max(0, back.Sub(promoted)).Round(10*time.Millisecond), c.counts())
			if d := back.Sub(stopping); d > 10*time.Second {
				t.Errorf("claims resumed %s after the primary stopped: want within 10s", d)
			}
			c.verify(t)
		})
	}
}

// answer is the service's answer to one claim of a new key.
type answer struct {
	execution string
	stamp     string // the run stamp the claim sent, as the shipped workflow makes it
	code      int
	decision  string
	errCode   string
	sent, at  time.Time // when the claim was sent, when it was answered
}

// claimers claim new keys, one after the other on each of their
// goroutines, and keep every answer.
type claimers struct {
	svc     *service
	mu      sync.Mutex
	answers map[string]answer // event id → answer
	done    chan struct{}
	wg      sync.WaitGroup
}

func (c *claimers) start(n int) {
	c.done = make(chan struct{})
	for g := range n {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-c.done:
					return
				default:
				}
				event, exec := fmt.Sprintf("order-%d-%d", g, i), fmt.Sprintf("%d%06d", g+1, i)
				a := c.claim(event, exec, fmt.Sprintf("%s:%d:fo", exec, time.Now().UnixMilli()))
				c.mu.Lock()
				c.answers[event] = a
				c.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
}

func (c *claimers) stop() { close(c.done); c.wg.Wait() }

// claim sends one claim and reads its answer; a request the service did not
// answer is code 0.
func (c *claimers) claim(event, exec, stamp string) answer {
	body := fmt.Sprintf(`{"source":"shop","event_id":%q,"execution_id":%q,"workflow_id":"wf1","run_stamp":%q}`,
		event, exec, stamp)
	req, _ := http.NewRequest("POST", c.svc.URL+"/v1/claims", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.svc.Token)
	a := answer{execution: exec, stamp: stamp, sent: time.Now()}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	a.at = time.Now()
	if err != nil {
		return a
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v struct {
		Decision string `json:"decision"`
		Error    struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(raw, &v)
	a.code, a.decision, a.errCode = resp.StatusCode, v.Decision, v.Error.Code
	return a
}

// firstOKSentAfter returns when the first claim sent after t was answered
// 200 (zero if none was).
func (c *claimers) firstOKSentAfter(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for _, a := range c.answers {
		if a.code == http.StatusOK && a.sent.After(t) && (first.IsZero() || a.at.Before(first)) {
			first = a.at
		}
	}
	return first
}

// counts returns how many claims got each answer.
func (c *claimers) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string]int{}
	for _, a := range c.answers {
		n[fmt.Sprintf("%d %s%s", a.code, a.decision, a.errCode)]++
	}
	return n
}

// verify checks every answer: a new key is claimed, or the answer is a 503
// the client may resend: unavailable or busy (nothing recorded), or unknown
// (the commit's answer was lost with the primary: it may be recorded). Then it asks again on the new
// primary: a key answered claimed is held by its execution (another
// execution is told in_progress), and a key answered 503 is the claiming
// execution's when it sends the same claim again (claimed, or held when the
// first attempt's commit got through before the answer was lost).
func (c *claimers) verify(t *testing.T) {
	t.Helper()
	for event, a := range c.answers {
		switch {
		case a.code == http.StatusOK && a.decision == "claimed":
			again := c.claim(event, "9"+a.execution, "9"+a.stamp)
			if again.code != http.StatusOK || again.decision != "in_progress" {
				t.Errorf("%s was answered claimed by %s before the failover; another execution's claim after it: %d %s%s (lost?)",
					event, a.execution, again.code, again.decision, again.errCode)
			}
		case a.code == http.StatusServiceUnavailable && (a.errCode == "unavailable" || a.errCode == "busy" || a.errCode == "unknown"):
			again := c.claim(event, a.execution, a.stamp)
			if again.code != http.StatusOK || (again.decision != "claimed" && again.decision != "held") {
				t.Errorf("%s was answered 503 to %s; its claim sent again: %d %s%s", event, a.execution,
					again.code, again.decision, again.errCode)
			}
		default:
			t.Errorf("%s: a wrong answer to %s's claim of a new key: %d %s%s", event, a.execution, a.code, a.decision, a.errCode)
		}
	}
}

// TestDatabaseURLHostLists: a URL that lists its hosts in the host part, as
// libpq and other drivers take them, is moved to lib/pq's ?host=…&port=…;
// one that lists them twice is refused at start, naming the variable.
func TestDatabaseURLHostLists(t *testing.T) {
	for _, tc := range []struct{ url, dsn string }{
		{"postgres://u:secret@db1:5432,db2:5433/ra?target_session_attrs=read-write",
			"postgres://u:secret@/ra?connect_timeout=5&host=db1%2Cdb2&port=5432%2C5433&target_session_attrs=read-write"},
		{"postgresql://u@db1,db2:6432/ra", "postgresql://u@/ra?connect_timeout=5&host=db1%2Cdb2&port=5432%2C6432&target_session_attrs=read-write"},
		{"postgres://u@/ra?host=db1,db2&port=1,2&target_session_attrs=any", "postgres://u@/ra?connect_timeout=5&host=db1%2Cdb2&port=1%2C2&target_session_attrs=any"},
		{"postgres://u@db1:5432/ra?pgbouncer=true", "postgres://u@db1:5432/ra?binary_parameters=yes&connect_timeout=5"},
	} {
		dsn, where, _, err := postgres.DataSource(tc.url)
		if err != nil || dsn != tc.dsn || strings.Contains(where, "secret") {
			t.Errorf("%s:\n got %s (%s) %v\nwant %s", tc.url, dsn, where, err, tc.dsn)
		}
	}
	for _, bad := range []string{"postgres://u@db1:1,db2:2/ra?host=db3", "postgres://u@db1:1,:2/ra", "postgres://u@db1/ra?pgbouncer=maybe"} {
		_, err := loadConfig(func(k string) string {
			return map[string]string{"RETRYAUDIT_DATABASE_URL": bad, "RETRYAUDIT_DATA_DIR": t.TempDir()}[k]
		})
		if err == nil || !strings.Contains(err.Error(), "RETRYAUDIT_DATABASE_URL") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
