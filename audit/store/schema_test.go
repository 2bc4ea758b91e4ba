package store_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
)

// The SQL that users already run from n8n's Postgres node, from the design.
const (
	designTable = `CREATE TABLE webhook_events (source text NOT NULL, event_id text NOT NULL, status text NOT NULL DEFAULT 'processing',
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (source, event_id))`
	designClaim   = `INSERT INTO webhook_events (source, event_id) VALUES ('shop','order-1042') ON CONFLICT (source, event_id) DO NOTHING RETURNING event_id`
	designDone    = `UPDATE webhook_events SET status='done', updated_at=now() WHERE source='shop' AND event_id='order-1042' AND status='processing' RETURNING event_id`
	designReclaim = `UPDATE webhook_events SET status='processing', updated_at=now() WHERE source='shop' AND event_id='order-1042' AND status='failed' RETURNING event_id`
)

func rows(t *testing.T, db *sqlx.DB, query string) int {
	t.Helper()
	var ids []string
	if err := db.Select(&ids, query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return len(ids)
}

// TestDesignSQL runs the design's SQL against the service's PostgreSQL
// schema and reads its rows back through the service.
func TestDesignSQL(t *testing.T) {
	ctx := context.Background()
	t.Run("against the migrated schema", func(t *testing.T) {
		s := audittest.Open(t, "postgres", store.Options{})
		db := s.DB()
		if n := rows(t, db, designClaim); n != 1 {
			t.Fatalf("first claim returned %d rows, want 1", n)
		}
		if n := rows(t, db, designClaim); n != 0 {
			t.Fatalf("second claim returned %d rows, want 0", n)
		}
		ev, err := s.Event(ctx, "shop", "order-1042")
		if err != nil || ev.Status != audit.StatusProcessing {
			t.Fatalf("service reads %+v, %v", ev.Event, err)
		}
		if n := rows(t, db, designReclaim); n != 0 {
			t.Errorf("reclaim of a processing entry returned %d rows", n)
		}
		if n := rows(t, db, designDone); n != 1 {
			t.Fatalf("done returned %d rows, want 1", n)
		}
		res, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "order-1042", ExecutionID: "9"})
		if err != nil || res.Decision != audit.DecisionDuplicate {
			t.Errorf("service claim after SQL done: %+v, %v", res, err)
		}
		if _, err := db.Exec(`UPDATE webhook_events SET status = 'failed' WHERE event_id = 'order-1042'`); err != nil {
			t.Fatal(err)
		}
		if n := rows(t, db, designReclaim); n != 1 {
			t.Errorf("reclaim of a failed entry returned %d rows, want 1", n)
		}
	})

	t.Run("a table users created before the service is adopted", func(t *testing.T) {
		url := audittest.URL(t, "postgres")
		raw, err := sqlx.Open("postgres", url)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.Exec(designTable); err != nil {
			t.Fatal(err)
		}
		if n := rows(t, raw, designClaim); n != 1 {
			t.Fatalf("claim returned %d rows", n)
		}
		s := audittest.OpenURL(t, store.Options{URL: url})
		ev, err := s.Event(ctx, "shop", "order-1042")
		if err != nil || ev.Status != audit.StatusProcessing || ev.Deliveries != 0 {
			t.Fatalf("adopted row reads %+v, %v", ev.Event, err)
		}
		res, err := s.Claim(ctx, audit.ClaimRequest{Source: "shop", EventID: "order-1042", ExecutionID: "9"})
		if err != nil || res.Process {
			t.Errorf("a key claimed by SQL is not free: %+v, %v", res, err)
		}
		if n := rows(t, s.DB(), designDone); n != 1 {
			t.Errorf("done returned %d rows, want 1", n)
		}
	})

	t.Run("the table has the design's columns and primary key", func(t *testing.T) {
		s := audittest.Open(t, "postgres", store.Options{})
		var cols []struct {
			Name     string `db:"column_name"`
			Type     string `db:"data_type"`
			Nullable string `db:"is_nullable"`
		}
		if err := s.DB().Select(&cols, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'webhook_events'`); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"source": "text", "event_id": "text", "status": "text",
			"created_at": "timestamp with time zone", "updated_at": "timestamp with time zone"}
		got := map[string]string{}
		for _, c := range cols {
			got[c.Name] = c.Type
			if want[c.Name] != "" && c.Nullable != "NO" {
				t.Errorf("%s is nullable", c.Name)
			}
		}
		for name, typ := range want {
			if got[name] != typ {
				t.Errorf("column %s is %q, want %q", name, got[name], typ)
			}
		}
		var pk []string
		if err := s.DB().Select(&pk, `SELECT a.attname FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = 'webhook_events'::regclass AND i.indisprimary ORDER BY a.attnum`); err != nil {
			t.Fatal(err)
		}
		if len(pk) != 2 || pk[0] != "source" || pk[1] != "event_id" {
			t.Errorf("primary key = %v", pk)
		}
	})
}
