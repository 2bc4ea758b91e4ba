//go:build n8n

package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // n8n's database, to back it up

	"github.com/retryaudit/retryaudit/audit"
)

// restoredN8N puts n8n's database back from a copy taken at the step's
// start, as a restore from a backup does: n8n's execution ids start again,
// and ids the service knows name other executions. Before the restore, event E is
// held by execution a, and b is a Retry of a; after it, a new event F gets
// a's id and E's redelivery gets b's (runs of the Plain workflow fill the
// ids between).
//
// The service tells executions apart by n8n's start time and end (its
// hooks here): the new executions are kept as a~2 and b~2, and E's
// redelivery as b~2 is no Retry of E's holder. The service is stopped
// while b fails and started again: the hooks' late reports of b are b, not
// a restore, and the real restore is alerted once.
func (r *run) restoredN8N(t *testing.T) {
	// The copy is taken with the error workflow published, as it is in
	// use: the restored n8n publishes it again as it starts. Until then,
	// no error workflow runs between a and b.
	//
	// The failing feed is unpublished in the copy: a restored n8n that
	// starts a polling trigger keeps its publication "in_progress" ever
	// after (n8n 2.41.1), and no publish or unpublish of it then ends.
	// It is published again, afresh, once the restored n8n runs.
	r.n8n.unpublish(t, r.feed.ID)
	backup := r.n8n.backup(t)
	r.n8n.unpublish(t, r.errors.ID)
	// A few ids between the copy and a: what n8n may run by itself after
	// the restore (a trigger's poll) does not take a's.
	for range 3 {
		r.plainRun(t)
	}
	e := r.newID()
	a := r.hangingRun(t, e)
	// The service is away while the Retry fails, and the hooks' reports
	// wait longer than its restart: reconciliation finds b's failure
	// through n8n's API first, then the hooks deliver b's start and end.
	// That late start is of b, the execution the service saw end, not a
	// new one (d57721e took it for one and said that n8n's ids started
	// again; its alert, once an hour, then swallowed the real restore's).
	r.tap.set("pause")
	r.svc.stop(t)
	r.crm.setMode(crmGarbled)
	retry := r.n8n.retry(t, a)
	r.crm.setMode(crmNormal)
	r.svc = r.svc.restart(t, r.t)
	if retry.Status != "error" || retry.RetryOf != a {
		t.Fatalf("the retry of %s is %+v, want a failed retry", a, retry)
	}
	b := retry.ID
	eventually(t, reconcileWithin, "reconciliation finding execution "+b, func() string {
		status, body := r.svc.page(t, "/errors?kind=found_by_reconcile")
		if status != http.StatusOK || !strings.Contains(body, ">"+b+"</a>") {
			return fmt.Sprintf("%d, execution %s not listed", status, b)
		}
		return ""
	})
	r.tap.set("")
	eventually(t, alertWithin, "the hooks delivering "+b+"'s start and end", func() string {
		if got := r.tap.execution(b); len(got.Starts) == 0 || len(got.Ends) == 0 {
			return fmt.Sprintf("%d starts, %d ends", len(got.Starts), len(got.Ends))
		}
		return ""
	})
	eventually(t, alertWithin, "the service knowing "+b+" as a retry of "+a, func() string {
		for _, x := range r.ledger(t, "shop", e).Executions {
			if x.ExecutionID == b && x.RetryOf == a {
				return ""
			}
		}
		return "not yet"
	})
	before := r.ledger(t, "shop", e)
	time.Sleep(2 * time.Second) // the outbox would have sent an alert by now
	if got := r.slack.about("started again"); len(got) != 0 {
		t.Fatalf("before any restore, an alert says that n8n's execution ids started again: %v", got)
	}
	for _, x := range r.ledger(t, "shop", e).Executions {
		if x.ExecutionID != audit.N8NID(x.ExecutionID) {
			t.Fatalf("before any restore, the service keeps execution %s as a reused id", x.ExecutionID)
		}
	}

	r.n8n.stop(t)
	r.n8n.restore(t, backup)
	r.n8n.start(t)
	restarted := time.Now()
	defer r.n8n.publish(t, r.feed.ID)

	// A new event: n8n gives it a's id again. It acts, once.
	r.padTo(t, a)
	f := r.newID()
	status, out := r.deliver(t, "orders", f)
	if status != http.StatusOK || out["outcome"] != "done" {
		t.Fatalf("a new event after the restore was answered %d %v; %s", status, out, r.n8n.lastRun(t, r.orders.ID))
	}
	fe := r.ledger(t, "shop", f)
	// The service keeps an execution that reuses an id as the id, "~" and
	// a count: n8n's 44 after the restore is the service's 44~2.
	if audit.N8NID(fe.HolderExecutionID) != a || fe.HolderExecutionID == a {
		t.Fatalf("n8n gave the new event execution %s; the test needs it to reuse %s, the first id after the copy",
			fe.HolderExecutionID, a)
	}
	r.oneOrder(t, "shop", f)
	if fe.Status != "done" || strings.Join(fe.decisions(), ",") != "claimed" {
		t.Errorf("the new event with a reused execution id: %s %v, want done, claimed once", fe.Status, fe.decisions())
	}

	// E again: n8n gives the delivery b's id, which the service knew as a
	// Retry of E's holder. It is a redelivery of an event in progress.
	r.n8n.waitExecution(t, a) // it answered its sender before it ended: its id must be listed before padTo counts
	r.padTo(t, b)
	creates := r.crm.createCount()
	status, out = r.deliver(t, "orders", e)
	if status != http.StatusOK || out["duplicate"] != true || out["decision"] != "in_progress" {
		t.Errorf("E's redelivery after the restore was answered %d %v, want in_progress and nothing done", status, out)
	}
	after := r.ledger(t, "shop", e)
	var redelivery string
	for _, h := range after.History {
		if h.Kind == "claim" && !slices.ContainsFunc(before.History, func(o historyLine) bool { return o.ID == h.ID }) {
			redelivery = h.ExecutionID
			if h.Decision == "held" {
				t.Errorf("E's redelivery (execution %s) was held: stored lineage of the old %s was applied to a new execution",
					h.ExecutionID, b)
			}
		}
	}
	if audit.N8NID(redelivery) != b || redelivery == b {
		t.Errorf("E's redelivery ran as execution %q; the test needs it to reuse %s", redelivery, b)
	}
	if after.Status != "processing" || after.HolderExecutionID != a {
		t.Errorf("E is %s held by %s after the restore, want processing held by %s", after.Status, after.HolderExecutionID, a)
	}
	if n := r.crm.createCount() - creates; n != 0 {
		t.Errorf("E's redelivery sent %d creates to the CRM", n)
	}

	// One alert says that n8n's ids started again.
	eventually(t, alertWithin, "the alert that n8n's execution ids started again", func() string {
		if len(r.slack.about("started again")) == 0 {
			return "no such message"
		}
		return ""
	})
	r.deliver(t, "orders", r.newID()) // one more execution after the restore: still one alert
	time.Sleep(2 * time.Second)       // the outbox would have sent a second by now
	if n := len(r.slack.about("started again")); n != 1 {
		t.Errorf("%d alerts say that n8n's execution ids started again, want 1", n)
	}
	t.Logf("the restored n8n took %s from its start", time.Since(restarted).Round(time.Second))
}

// backup copies n8n's SQLite database while n8n runs, as a backup does
// (VACUUM INTO: one consistent snapshot), and returns the copy.
func (n *n8n) backup(t *testing.T) string {
	t.Helper()
	db, err := sql.Open("sqlite", n.database()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	to := filepath.Join(t.TempDir(), "database.sqlite")
	if _, err := db.Exec(`VACUUM INTO ?`, to); err != nil {
		t.Fatalf("back n8n's database up: %v", err)
	}
	return to
}

// restore puts a backup in place of n8n's database; n8n must be stopped.
func (n *n8n) restore(t *testing.T, backup string) {
	t.Helper()
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{n.database() + "-wal", n.database() + "-shm"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(n.database(), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// database is where n8n keeps its SQLite database.
func (n *n8n) database() string { return filepath.Join(n.cfg.User, ".n8n", "database.sqlite") }

// padTo runs the Plain workflow until n8n's newest execution is the one
// before id, so that the next execution gets id. n8n's list leaves out
// running executions: nothing may run when it is called.
func (r *run) padTo(t *testing.T, id string) {
	t.Helper()
	want, err := strconv.Atoi(id)
	if err != nil {
		t.Fatalf("execution id %q is not a number", id)
	}
	for {
		var page struct {
			Data []n8nExecution `json:"data"`
		}
		r.n8n.api(t, "GET", "/executions?limit=1", nil, http.StatusOK, &page)
		newest := 0
		if len(page.Data) > 0 {
			newest, _ = strconv.Atoi(page.Data[0].ID)
		}
		switch {
		case newest == want-1:
			return
		case newest >= want:
			var recent struct {
				Data []n8nExecution `json:"data"`
			}
			r.n8n.api(t, "GET", "/executions?limit=5", nil, http.StatusOK, &recent)
			t.Fatalf("n8n's newest execution is %d already: the next cannot be %s; the newest are %+v", newest, id, recent.Data)
		}
		r.plainRun(t)
	}
}

// plainRun runs the Plain workflow once.
func (r *run) plainRun(t *testing.T) {
	t.Helper()
	if status, raw := do(t, http.DefaultClient, "POST", r.n8n.URL+"/webhook/plain", nil, map[string]any{}); status != http.StatusOK {
		t.Fatalf("the Plain workflow was answered %d %s", status, raw)
	}
}
