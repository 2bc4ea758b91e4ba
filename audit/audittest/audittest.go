// Package audittest opens fresh, migrated stores for tests: a SQLite file in
// the test's temporary directory, and a PostgreSQL schema of its own that is
// dropped when the test ends.
//
// PostgreSQL is found through RETRYAUDIT_TEST_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable). When it does
// not answer, its tests are skipped, unless RETRYAUDIT_TEST_REQUIRE_POSTGRES=1,
// which CI sets: then they fail.
package audittest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/n8n"
)

// DefaultPostgresURL is where tests look for PostgreSQL when
// RETRYAUDIT_TEST_POSTGRES_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Dialects are the databases every store test runs on.
var Dialects = []string{"sqlite", "postgres"}

// Each runs fn once per dialect, as a subtest named after it.
func Each(t *testing.T, fn func(t *testing.T, dialect string)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) { fn(t, d) })
	}
}

// URL returns the URL of an empty database of the dialect, private to the
// test: a SQLite file, or a PostgreSQL schema (through search_path).
func URL(t testing.TB, dialect string) string {
	t.Helper()
	if dialect == "sqlite" {
		return "sqlite:" + filepath.Join(t.TempDir(), "retryaudit.db")
	}
	admin := postgres(t)
	schema := "ra_test_" + randomHex(6)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		// A session the test cut off (Proxy) may still hold the schema's
		// locks and take more: PostgreSQL then picks one side of the
		// deadlock, which may be the drop. Dropping again settles it.
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if _, err = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err == nil || !strings.Contains(err.Error(), "40P01") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(PostgresURL())
	if err != nil {
		t.Fatalf("RETRYAUDIT_TEST_POSTGRES_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Open returns a migrated store on a fresh database of the dialect, closed
// when the test ends. opts.URL is set by Open.
func Open(t testing.TB, dialect string, opts store.Options) *store.Store {
	t.Helper()
	opts.URL = URL(t, dialect)
	return OpenURL(t, opts)
}

// Patience is how long a test may wait for work to finish: the time left
// before the test binary's deadline (go test -timeout), less a minute to
// report, or ten minutes without one. The service's own waits (an API
// request's timeout, a claim's wait in the queue, a lock's) take it in
// tests, so that a busy machine makes a test slower, never wrong: how the
// service answers when they run out has tests of its own.
func Patience(t testing.TB) time.Duration {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, ok := d.Deadline(); ok {
			return max(time.Until(at)-time.Minute, time.Minute)
		}
	}
	return 10 * time.Minute
}

// OpenURL opens and migrates the store opts names, closed when the test ends.
// Without a Redactor in opts it uses n8n.Redactor, as the service does.
func OpenURL(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	ctx := context.Background()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Redactor == nil {
		opts.Redactor = n8n.Redactor{}
	}
	if opts.Batching.Wait == 0 {
		// Tests race many claims on a busy machine to check what is
		// decided, not how fast: a claim that waits is not shed. The
		// shedding has tests of its own.
		opts.Batching.Wait = Patience(t)
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = Patience(t)
	}
	s, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

// PostgresURL returns the URL tests use to reach PostgreSQL.
func PostgresURL() string {
	if u := os.Getenv("RETRYAUDIT_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// postgres connects to PostgreSQL as its administrator, or skips (or, when
// required, fails) the test.
func postgres(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", PostgresURL())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		if os.Getenv("RETRYAUDIT_TEST_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL is required (RETRYAUDIT_TEST_REQUIRE_POSTGRES=1) but does not answer at %s: %v",
				PostgresURL(), err)
		}
		t.Skipf("PostgreSQL does not answer at %s (set RETRYAUDIT_TEST_POSTGRES_URL): %v", PostgresURL(), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Clock is a settable clock for stores under test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that starts at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
