package store_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// broadSearch is a step of a query plan that reads a whole table, or every
// row of one status or one source: in a batch statement it costs as much as
// the table is large, for every batch.
var broadSearch = regexp.MustCompile(`^SCAN (\w+)$|^SEARCH \w+ USING (COVERING )?INDEX \w+ \((status|source)=\?\)$`)

// smallSets are what a batch statement may read whole: its own row sets
// (j, r) and the CTEs built from them (LedgerLock's).
var smallSets = map[string]bool{"j": true, "r": true, "c": true, "chain": true, "ids": true, "keys": true,
	"locked": true, "items": true, "named": true}

// TestSQLiteBatchesStartFromTheirRows: on SQLite every statement that
// reads a batch's rows (json_each) looks each row up by its key, rather
// than reading every entry of a status and looking it up in the batch.
// The outcome batch's holder read did that: outcomes fell from about 1,900
// to 40 a second once 30,000 entries were processing.
func TestSQLiteBatchesStartFromTheirRows(t *testing.T) {
	s := audittest.Open(t, "sqlite", store.Options{})
	db := s.DB()
	n := 0
	for name, all := range s.Statements() {
		for _, text := range strings.Split(all, ";\n") { // SQLite's LedgerWrite is a statement a table
			if !strings.Contains(text, "json_each") {
				continue
			}
			n++
			q := db.Rebind(namedParam.ReplaceAllString(text, "$1?"))
			var plan []struct {
				ID     int    `db:"id"`
				Parent int    `db:"parent"`
				Unused int    `db:"notused"`
				Detail string `db:"detail"`
			}
			if err := db.Select(&plan, "EXPLAIN QUERY PLAN "+q, make([]any, strings.Count(q, "?"))...); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for _, step := range plan {
				if m := broadSearch.FindStringSubmatch(step.Detail); m != nil && !smallSets[m[1]] {
					t.Errorf("%s reads more than its rows: %q\n%s", name, step.Detail, q)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("checked %d batch statements: the catalogue did not load", n)
	}
}

// wholeTable is a step of a PostgreSQL plan that reads every row of a table
// the batch statements look their rows up in. A hash join with such a
// table on either side reads it with such a step, so it is caught too.
var wholeTable = regexp.MustCompile(`Seq Scan on (webhook_events|event_executions|executions|n8n_errors|outbox)\b`)

// seedPlanTables fills the tables that batch statements read with 20,000
// rows each, as a busy ledger has, and gathers their statistics: on nearly
// empty tables every plan reads them whole, and rightly.
const seedPlanTables = `
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, updated_at, last_seen_at)
  SELECT 'source-' || i % 10, 'event-' || i, (ARRAY['done', 'done', 'done', 'processing', 'failed'])[i % 5 + 1],
  'execution-' || i, now() - i * interval '1 minute', now() - i * interval '1 minute'
  FROM generate_series(1, 20000) AS i;
INSERT INTO executions (execution_id, n8n_id, root_execution_id, retry_of, mode)
  SELECT 'execution-' || i, 'execution-' || i, 'execution-' || (i - i % 3),
  CASE WHEN i % 3 > 0 THEN 'execution-' || (i - 1) ELSE '' END, 'webhook'
  FROM generate_series(1, 20000) AS i;
INSERT INTO event_executions (source, event_id, execution_id, role, acted)
  SELECT 'source-' || i % 10, 'event-' || i, 'execution-' || i, 'claim', true
  FROM generate_series(1, 20000) AS i;
INSERT INTO n8n_errors (dedupe_key, kind, execution_id, root_execution_id, source, event_id)
  SELECT 'exec:execution-' || i, 'execution_error', 'execution-' || i, 'execution-' || (i - i % 3),
  CASE WHEN i % 10 > 0 THEN 'source-' || i % 10 END, CASE WHEN i % 10 > 0 THEN 'event-' || i END
  FROM generate_series(1, 20000) AS i;
INSERT INTO outbox (thread_key, kind, source, event_id, payload, state)
  SELECT 'event:source-' || i % 10 || ':event-' || i, 'alert', 'source-' || i % 10, 'event-' || i, '{}', 'sent'
  FROM generate_series(1, 20000) AS i;
ANALYZE webhook_events, executions, event_executions, n8n_errors, outbox;
`

// TestPostgresBatchesStartFromTheirRows: on PostgreSQL every statement that
// reads a batch's rows (unnested JSON or arrays) looks each row up by its
// key, rather than reading a whole table and hashing it. The plan is the
// generic one, which the store's prepared statements get once they have
// run a few times on a connection; the custom plans of their first runs
// see an array parameter's true length and are not checked here.
// jsonb_to_recordset, which the planner takes for 100 rows, had the claim
// batch hash tables of 20,000 entries.
func TestPostgresBatchesStartFromTheirRows(t *testing.T) {
	s := audittest.Open(t, "postgres", store.Options{})
	db := s.DB()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, seedPlanTables); err != nil {
		t.Fatalf("seed: %v", err)
	}
	conn, err := db.Connx(ctx) // a prepared statement and a setting belong to their session
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `RESET plan_cache_mode`)
	n := 0
	for name, text := range s.Statements() {
		if !strings.Contains(text, "jsonb_array_elements") && !strings.Contains(text, "unnest(") {
			continue
		}
		q := namedParam.ReplaceAllString(text, "$1?")
		params := strings.Count(q, "?")
		if _, err := conn.ExecContext(ctx, "PREPARE batch AS "+db.Rebind(q)); err != nil {
			t.Errorf("%s: %v\n%s", name, err, q)
			continue
		}
		var plan []string
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")
		err := conn.SelectContext(ctx, &plan, "EXPLAIN EXECUTE batch("+nulls+")")
		if _, err := conn.ExecContext(ctx, `DEALLOCATE batch`); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		n++
		var whole []string
		for _, step := range plan {
			if wholeTable.MatchString(step) {
				whole = append(whole, strings.TrimSpace(step))
			}
		}
		if whole != nil {
			t.Errorf("%s reads whole tables:\n%s\nits plan:\n%s", name, strings.Join(whole, "\n"), strings.Join(plan, "\n"))
		}
	}
	t.Logf("checked the plans of %d batch statements", n)
	if n < 3 {
		t.Errorf("checked %d batch statements: the catalogue did not load", n)
	}
}

// TestPostgresLedgerKeepsItsGenericPlan: the ledger's two statements run
// for every batch, prepared. PostgreSQL plans a prepared statement anew
// for each run (a custom plan) for as long as its custom plans cost less
// than the generic one; a parameter a custom plan folds away (a switch
// such as CAST(:touch AS boolean)) made them cheaper, and a fifth of
// PostgreSQL's CPU a claim went to planning the lock (docs/performance.md).
// Run as a batch of claims runs them (switches off, a few keys), each keeps
// its generic plan after PostgreSQL's five trial runs. And the lock looks
// the batch's entries up by key in a young table too (3,000 entries): a
// join read the table whole to hash the keys against it, twice a batch,
// which the planner's costs prefer to twenty index probes below about
// 4,000 rows and which took 8 ms a batch at 8,500 (its statistics lagging).
func TestPostgresLedgerKeepsItsGenericPlan(t *testing.T) {
	s := audittest.Open(t, "postgres", store.Options{})
	db := s.DB()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, updated_at, last_seen_at)
  SELECT 'shop', 'event-' || i, 'done', 'execution-' || i, now(), now() FROM generate_series(1, 3000) AS i;
ANALYZE webhook_events;
`); err != nil {
		t.Fatalf("seed: %v", err)
	}
	conn, err := db.Connx(ctx) // pg_prepared_statements shows its own session's
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	claims := map[string]any{"keys": `[{"source":"shop","event_id":"e1"},{"source":"shop","event_id":"event-7"},` +
		`{"source":"shop","event_id":"event-8"},{"source":"shop","event_id":"event-9"}]`,
		"ids": `["41","execution-7"]`, "stamps": `["41:1764925200000:a"]`, "dedupe": `[]`,
		"touch": false, "pending": false, "evidence": false, "now": time.Now(), "hour": time.Now(), "shard": 0}
	for _, name := range []string{"LedgerLock", "LedgerWrite"} {
		text := s.Statements()[name]
		for _, p := range namedParam.FindAllString(text, -1) {
			if p = p[strings.IndexByte(p, ':')+1:]; claims[p] == nil {
				claims[p] = `[]` // a row set the batch does not write
			}
		}
		q, args, err := sqlx.Named(text, claims)
		if err != nil {
			t.Fatal(err)
		}
		q = db.Rebind(q)
		stmt, err := conn.PreparexContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for range 8 {
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		var generic, custom int64
		if err := conn.QueryRowxContext(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement = $1`, q).Scan(&generic, &custom); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		stmt.Close()
		if generic < 3 {
			t.Errorf("%s ran 8 times: %d generic plans, %d custom: PostgreSQL plans it for every batch", name, generic, custom)
		}
		plan := genericPlan(ctx, t, conn, q, len(args))
		for _, step := range plan {
			if strings.Contains(step, "Seq Scan on webhook_events") {
				t.Errorf("%s reads every entry: %s\n%s", name, strings.TrimSpace(step), strings.Join(plan, "\n"))
			}
		}
	}
}

// genericPlan is the plan PostgreSQL keeps for q (of params parameters)
// once it stops planning it for each run.
func genericPlan(ctx context.Context, t *testing.T, conn *sqlx.Conn, q string, params int) []string {
	t.Helper()
	if _, err := conn.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `RESET plan_cache_mode`)
	if _, err := conn.ExecContext(ctx, "PREPARE generic AS "+q); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `DEALLOCATE generic`)
	var plan []string
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")
	if err := conn.SelectContext(ctx, &plan, "EXPLAIN EXECUTE generic("+nulls+")"); err != nil {
		t.Fatal(err)
	}
	return plan
}
