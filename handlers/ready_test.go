package handlers_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/audittest"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
	"github.com/retryaudit/retryaudit/metrics"
)

// failWrites makes every write of the service_state table fail, as a disk
// that refuses writes does (SQLite's disk I/O error, PostgreSQL's full
// disk), while the database still answers pings and reads; the returned
// function makes writes work again.
func failWrites(t *testing.T, s *store.Store) func() {
	t.Helper()
	db := s.DB()
	set, unset := []string{
		`CREATE TRIGGER ra_test_fail_insert BEFORE INSERT ON service_state BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`,
		`CREATE TRIGGER ra_test_fail_update BEFORE UPDATE ON service_state BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`,
	}, []string{`DROP TRIGGER ra_test_fail_insert`, `DROP TRIGGER ra_test_fail_update`}
	if s.Dialect() == "postgres" {
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
	return func() {
		for _, q := range unset {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
}

// readyz returns /readyz's status and reason.
func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	reason, _ := out["reason"].(string)
	return resp.StatusCode, reason
}

// eventually polls cond every 20 ms for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 5 s", what)
}

// TestReadyzTellsWhenWritesFail: while every write fails and the database
// still answers pings and reads, /readyz answers 503 (it answered 200
// before, so the image's HEALTHCHECK called a broken container healthy),
// and 200 again after a write succeeds; the outage is logged once when it
// starts and once when it ends, not per probe. Then, with the database
// gone, requests answering 503 log one line between them.
func TestReadyzTellsWhenWritesFail(t *testing.T) {
	audittest.Each(t, func(t *testing.T, dialect string) {
		logs := &syncBuffer{}
		st := audittest.Open(t, dialect, store.Options{})
		h, err := handlers.New(handlers.Config{Store: st, Token: testToken, Metrics: metrics.New(),
			Links: audit.Links{BaseURL: "http://retryaudit.test"}, APITimeout: 5 * time.Second,
			WriteProbe: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h.Engine())
		t.Cleanup(ts.Close)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.ProbeWrites(ctx); close(done) }()
		t.Cleanup(func() { stop(); <-done })

		if code, reason := readyz(t, ts.URL); code != http.StatusOK {
			t.Fatalf("before: %d %s", code, reason)
		}
		restore := failWrites(t, st)
		eventually(t, "/readyz answers 503 while writes fail", func() bool {
			code, reason := readyz(t, ts.URL)
			return code == http.StatusServiceUnavailable && strings.Contains(reason, "database writes fail")
		})
		time.Sleep(300 * time.Millisecond) // a few probes more, all failing
		restore()
		eventually(t, "/readyz answers 200 once a write succeeds", func() bool {
			code, _ := readyz(t, ts.URL)
			return code == http.StatusOK
		})
		out := logs.String()
		if n := strings.Count(out, "a write failed"); n != 1 {
			t.Errorf("%d lines say a write failed, want 1:\n%s", n, out)
		}
		if n := strings.Count(out, "writes succeed again"); n != 1 {
			t.Errorf("%d lines say writes succeed again, want 1:\n%s", n, out)
		}

		before := len(logs.String())
		st.Close() // the database is gone
		for i := range 20 {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/claims", strings.NewReader(
				`{"source":"shop","event_id":"gone-`+string(rune('a'+i))+`","execution_id":"1","workflow_id":"wf1"}`))
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("a claim without a database: %d", resp.StatusCode)
			}
		}
		if code, _ := readyz(t, ts.URL); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz without a database: %d", code)
		}
		// The outage's first request and the probe it woke may each say
		// so; the other 19 requests and the probes after stay at debug.
		warned := 0
		for _, line := range strings.Split(logs.String()[before:], "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				warned++
			}
		}
		if warned < 1 || warned > 2 {
			t.Errorf("%d WARN or ERROR lines for 20 claims without a database, want 1 or 2:\n%s", warned, logs.String()[before:])
		}
	})
}
