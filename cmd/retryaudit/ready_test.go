package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit/audittest"
)

// TestHealthcheckFailsWhileWritesFail: serve's write probe turns /readyz to
// 503 while the database refuses writes (a trigger raising what a failing
// disk raises) though it answers pings and reads, so the image's
// HEALTHCHECK, retryaudit healthcheck, exits non-zero; when writes work
// again, it passes again.
func TestHealthcheckFailsWhileWritesFail(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		dbURL := audittest.URL(t, dialect)
		svc := startService(t, map[string]string{"RETRYAUDIT_DATABASE_URL": dbURL, "RETRYAUDIT_WRITE_PROBE": "100ms"})
		healthy := func() error {
			var out bytes.Buffer
			return run(context.Background(), []string{"healthcheck"},
				env(map[string]string{"RETRYAUDIT_ADDR": strings.TrimPrefix(svc.URL, "http://")}), &out)
		}
		if err := healthy(); err != nil {
			t.Fatalf("before: %v", err)
		}
		db := openDB(t, dialect, dbURL)
		if dialect == "sqlite" {
			db.SetMaxOpenConns(1) // one connection, so that its busy timeout holds
			if _, err := db.Exec(`PRAGMA busy_timeout = 10000`); err != nil {
				t.Fatal(err)
			}
		}
		set := []string{
			`CREATE TRIGGER ra_test_fail_insert BEFORE INSERT ON service_state BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`,
			`CREATE TRIGGER ra_test_fail_update BEFORE UPDATE ON service_state BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`,
		}
		unset := []string{`DROP TRIGGER ra_test_fail_insert`, `DROP TRIGGER ra_test_fail_update`}
		if dialect == "postgres" {
			set = []string{
				`CREATE FUNCTION ra_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				   RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; END $$`,
				`CREATE TRIGGER ra_test_fail BEFORE INSERT OR UPDATE ON service_state FOR EACH ROW EXECUTE FUNCTION ra_test_fail()`,
			}
			unset = []string{`DROP TRIGGER ra_test_fail ON service_state`, `DROP FUNCTION ra_test_fail()`}
		}
		for _, q := range set {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		within := func(what string, ok func(error) bool) {
			t.Helper()
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if ok(healthy()) {
					return
				}
			}
			t.Fatalf("%s: not within 10 s", what)
		}
		within("healthcheck fails while writes fail", func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "database writes fail")
		})
		for _, q := range unset {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		within("healthcheck passes once a write succeeds", func(err error) bool { return err == nil })
		if out := svc.Output.String(); strings.Count(out, "a write failed") != 1 {
			t.Errorf("the outage is not logged once:\n%s", out)
		}
	})
}
