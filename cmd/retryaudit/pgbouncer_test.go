package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

// TestPgBouncerTransactionPooling runs the service through Debian's
// pgbouncer in transaction mode (three server connections shared by every
// client) in front of a PostgreSQL cluster of the test's own, with the URL
// option pgbouncer=true: migrations by two stores at once, claims, outcomes,
// error payloads and a lock wait bounded by the lock timeout through the
// store, then two instances of the service under concurrent claims, errors,
// outcomes and Slack's outbox, and the live drill of retryaudit check. In
// transaction mode a server connection serves a client for one transaction:
// a prepared statement, a SET or a session's advisory lock stays behind on
// whichever server connection it ran on.
func TestPgBouncerTransactionPooling(t *testing.T) {
	tools := needClusters(t, true)
	pg := startCluster(t, tools, "primary")
	pb := startPgBouncer(t, pg, "transaction")

	t.Run("migrations", func(t *testing.T) {
		pg.exec(t, "postgres", "CREATE DATABASE migrations")
		url := pb.URL("migrations")
		defer others(t, pb.URL("migrations"))()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := store.Open(ctx, store.Options{URL: url, Redactor: n8n.Redactor{}})
				if err != nil {
					errs[i] = err
					return
				}
				defer s.Close()
				errs[i] = s.Migrate(ctx)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("store %d: migrate through pgbouncer: %v", i, err)
			}
		}
		s := audittest.OpenURL(t, store.Options{URL: url}) // migrates again: nothing to do
		if ok, err := s.SchemaCurrent(context.Background()); !ok || err != nil {
			t.Errorf("schema current: %v %v", ok, err)
		}
		db := pg.open(t, "migrations")
		defer db.Close()
		// The lock was a row of retryaudit_migration_lock, released: an
		// advisory lock is a session's, and behind PgBouncer a session is
		// any server connection (another instance's try may land on the
		// one that holds it, and succeed; the unlock may land on another).
		var applied, advisory int
		locked := -1
		db.QueryRow(`SELECT count(*) FROM retryaudit_schema_version WHERE version_id > 0`).Scan(&applied)
		db.QueryRow(`SELECT count(*) FROM retryaudit_migration_lock WHERE locked`).Scan(&locked)
		db.QueryRow(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'`).Scan(&advisory)
		if applied == 0 || locked != 0 || advisory != 0 {
			t.Errorf("after migrating: %d migrations recorded, %d migration locks held (-1: no lock table), %d advisory locks left",
				applied, locked, advisory)
		}
	})

	t.Run("store", func(t *testing.T) {
		pg.exec(t, "postgres", "CREATE DATABASE store")
		ctx := context.Background()
		s := audittest.OpenURL(t, store.Options{URL: pb.URL("store"), LockTimeout: 300 * time.Millisecond})
		defer others(t, pb.URL("store"))()

		// Every key claimed by four executions at once: one told to process.
		const keys, deliveries = 30, 4
		var mu sync.Mutex
		holders := map[string]string{}
		var wg sync.WaitGroup
		for k := range keys {
			for d := range deliveries {
				wg.Add(1)
				go func() {
					defer wg.Done()
					event, exec := fmt.Sprintf("order-%d", k), fmt.Sprintf("%d%02d", k+1, d)
					res, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: exec, WorkflowID: "wf1"})
					if err != nil {
						t.Errorf("claim %s by %s: %v", event, exec, err)
						return
					}
					if res.Process {
						mu.Lock()
						if holders[event] != "" {
							t.Errorf("%s processed by %s and %s", event, holders[event], exec)
						}
						holders[event] = exec
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		if len(holders) != keys {
			t.Fatalf("%d of %d keys told to process", len(holders), keys)
		}
		for k := range keys {
			event := fmt.Sprintf("order-%d", k)
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := s.ReportOutcome(ctx, audit.OutcomeRequest{Source: "shop", EventID: event, ExecutionID: holders[event],
					WorkflowID: "wf1", Outcome: audit.OutcomeDone, CRMRef: "CRM-" + event})
				if err != nil || out.Status != audit.StatusDone {
					t.Errorf("outcome of %s: %+v %v", event, out, err)
				}
				res, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: event, ExecutionID: "9" + holders[event], WorkflowID: "wf1"})
				if err != nil || res.Decision != audit.DecisionDuplicate {
					t.Errorf("claim of %s once done: %+v %v", event, res, err)
				}
			}()
		}
		wg.Wait()

		// An error payload, through the store's intake, read back.
		rec, err := s.RecordError(ctx, audit.N8NErrorReport{Kind: "execution_error", DedupeKey: "exec:77", ExecutionID: "77",
			WorkflowID: "wf1", Mode: "webhook", Node: "CRM", Message: "timeout",
			Payload: `{"execution":{"id":"77","error":{"message":"timeout"}},"workflow":{"id":"wf1"}}`})
		if err != nil {
			t.Fatalf("record error: %v", err)
		}
		got, err := s.Error(ctx, rec.ID)
		if err != nil || got.Message != "timeout" || !strings.Contains(got.Payload, `"timeout"`) {
			t.Errorf("the error read back: %+v %v", got, err)
		}
		// Reads outside a transaction, many at once: each gets its own
		// answer (a statement parsed in one round trip and bound in the
		// next could be bound on another client's server connection).
		for k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					event := fmt.Sprintf("order-%d", k)
					exec, err := s.ExecutionEvents(ctx, holders[event])
					if err != nil || len(exec) != 1 || exec[0].EventID != event {
						t.Errorf("events of execution %s: %+v %v", holders[event], exec, err)
						return
					}
				}
			}()
		}
		wg.Wait()

		// The lock timeout holds in every transaction: a resolution of an
		// entry whose row another session holds is answered busy after it,
		// not when the other session lets go.
		if _, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "held", ExecutionID: "5", WorkflowID: "wf1"}); err != nil {
			t.Fatal(err)
		}
		db := pg.open(t, "store")
		defer db.Close()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec(`SELECT 1 FROM webhook_events WHERE source = 'shop' AND event_id = 'held' FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		ctx10, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err = s.Resolve(ctx10, audit.ResolveRequest{Source: "shop", EventID: "held", To: audit.StatusFailed, Actor: "test",
			Note: "no order in the CRM", Holder: "5", Confirmed: true})
		if took := time.Since(start); !errors.Is(err, audit.ErrLocked) || took > 5*time.Second {
			t.Errorf("a resolution of a held row: %v after %s; want busy (ErrLocked) after the 300ms lock timeout", err, took)
		}
	})

	t.Run("service", func(t *testing.T) {
		pg.exec(t, "postgres", "CREATE DATABASE service")
		slack := &slackCounter{posts: map[string]int{}}
		fake := httptest.NewServer(slack)
		defer fake.Close()
		env := map[string]string{"RETRYAUDIT_DATABASE_URL": pb.URL("service"), "RETRYAUDIT_TOKEN": tok("shared-token"),
			"RETRYAUDIT_SLACK_BOT_TOKEN": "xoxb-test", "RETRYAUDIT_SLACK_CHANNEL": "C1", "RETRYAUDIT_SLACK_API_URL": fake.URL}
		var a, b *service
		var wg sync.WaitGroup
		wg.Add(2) // both migrate at start, through pgbouncer
		go func() { defer wg.Done(); a = startService(t, env) }()
		go func() { defer wg.Done(); b = startService(t, env) }()
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		instances := []*service{a, b}
		const keys, deliveries = 20, 5
		var mu sync.Mutex
		processed := map[string]int{}
		for k := range keys {
			for d := range deliveries {
				wg.Add(1)
				go func() {
					defer wg.Done()
					svc := instances[(k+d)%2]
					event, exec := fmt.Sprintf("order-%d", k), fmt.Sprintf("%d%02d", k+1, d)
					code, body := svc.api(t, "POST", "/v1/claims",
						fmt.Sprintf(`{"source":"shop","event_id":%q,"execution_id":%q,"workflow_id":"wf1"}`, event, exec))
					if code != http.StatusOK {
						t.Errorf("claim: %d %s", code, body)
						return
					}
					if !strings.Contains(body, `"process":true`) {
						return
					}
					mu.Lock()
					processed[event]++
					mu.Unlock()
					other := instances[(k+d+1)%2]
					if k%2 == 0 { // half fail: n8n reports the error
						code, body = other.api(t, "POST", "/v1/n8n/errors", fmt.Sprintf(
							`{"execution":{"id":%q,"mode":"webhook","lastNodeExecuted":"CRM","error":{"message":"timeout"}},"workflow":{"id":"wf1"}}`, exec))
						if code != http.StatusAccepted {
							t.Errorf("error intake: %d %s", code, body)
						}
						return
					}
					code, body = other.api(t, "POST", "/v1/outcomes",
						fmt.Sprintf(`{"source":"shop","event_id":%q,"outcome":"done","execution_id":%q,"workflow_id":"wf1"}`, event, exec))
					if code != http.StatusOK || !strings.Contains(body, `"status":"done"`) {
						t.Errorf("outcome: %d %s", code, body)
					}
				}()
			}
		}
		wg.Wait()
		for k := range keys {
			if n := processed[fmt.Sprintf("order-%d", k)]; n != 1 {
				t.Errorf("order-%d processed %d times", k, n)
			}
		}
		code, body := a.api(t, "GET", "/v1/events/shop/order-0", "")
		if code != http.StatusOK || !strings.Contains(body, `"timeout"`) {
			t.Errorf("an event with its error: %d %s", code, body)
		}
		// The alerts of the errors leave through the outbox, leased and
		// paced through the database.
		if waitFor(60*time.Second, func() bool {
			slack.mu.Lock()
			defer slack.mu.Unlock()
			return len(slack.posts) > 0
		}).IsZero() {
			t.Error("no alert reached Slack")
		}
		out, err := runCheck(t, map[string]string{"RETRYAUDIT_DATABASE_URL": pb.URL("service"), "RETRYAUDIT_TOKEN": tok("shared-token")},
			"--url", a.URL)
		if err != nil || strings.Count(out, "ok    drill: ") != 7 {
			t.Errorf("check --url through the service on pgbouncer: %v\n%s", err, out)
		}
		out, err = runCheck(t, map[string]string{"RETRYAUDIT_DATABASE_URL": pb.URL("service"), "RETRYAUDIT_TOKEN": tok("shared-token")})
		if err != nil || !strings.Contains(out, "all checks passed") {
			t.Errorf("check on pgbouncer: %v\n%s", err, out)
		}
	})
}

// others keeps PgBouncer's server connections busy with other clients'
// short transactions until the returned function is called, as on a shared
// installation: consecutive statements of one client land on different
// server connections.
func others(t *testing.T, url string) (stop func()) {
	t.Helper()
	db, err := sql.Open("postgres", strings.Replace(url, "&pgbouncer=true", "&binary_parameters=yes", 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				db.ExecContext(ctx, "SELECT pg_sleep(0.002)")
			}
		}()
	}
	return func() { cancel(); wg.Wait(); db.Close() }
}
