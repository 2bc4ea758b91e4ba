package store

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lib/pq"
	"github.com/pressly/goose/v3"
)

// dialect holds everything that differs between PostgreSQL and SQLite. The
// queries themselves are shared: they use ? placeholders (rebound by sqlx),
// ON CONFLICT and RETURNING, which both databases understand.
type dialect struct {
	name   string // "postgres" or "sqlite": also the migrations folder
	driver string // the database/sql driver name
	goose  goose.Dialect
	// leaseOutbox leases due outbox rows; PostgreSQL skips the rows another
	// instance is leasing at the same moment.
	leaseOutbox string
	// lockBatch ends the query that picks a batch for retention: PostgreSQL
	// locks it (skipping rows others hold) so that it stays what was
	// picked; SQLite has one writer, the batch cannot move.
	lockBatch string
	// uniqueKey counts the unique indexes on exactly (source, event_id) of
	// webhook_events.
	uniqueKey string
	// rowLocks: another session (n8n's Postgres node, a psql) can hold a
	// row, so a batch locks its entries' rows first, skipping those (see
	// claimBatchQueries.lockEntries). SQLite has no row locks, one writer:
	// nothing to skip.
	rowLocks bool
}

var (
	postgresDialect = dialect{name: "postgres", driver: "postgres", goose: goose.DialectPostgres,
		leaseOutbox: leaseOutboxStatement(leaseOutboxQuery + " FOR UPDATE SKIP LOCKED"),
		lockBatch:   " FOR UPDATE SKIP LOCKED",
		rowLocks:    true,
		uniqueKey: `SELECT count(*) FROM pg_index i WHERE i.indrelid = 'webhook_events'::regclass
			AND i.indisunique AND i.indnkeyatts = 2 AND i.indpred IS NULL
			AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
				WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY['event_id', 'source']`}
	sqliteDialect = dialect{name: "sqlite", driver: "sqlite", goose: goose.DialectSQLite3,
		leaseOutbox: leaseOutboxStatement(leaseOutboxQuery),
		uniqueKey: `SELECT count(*) FROM pragma_index_list('webhook_events') l WHERE l."unique" = 1
			AND l.partial = 0 AND (SELECT count(*) FROM pragma_index_info(l.name)) = 2
			AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'source')
			AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'event_id')`}
)

// sqliteTimeLayout is how SQLite stores times: fixed width and UTC, so that
// comparing the strings compares the times.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// t converts a time into a query argument.
func (d dialect) t(t time.Time) any {
	if d.name == "sqlite" {
		return t.UTC().Format(sqliteTimeLayout)
	}
	return t.UTC()
}

// dataSource resolves a RETRYAUDIT_DATABASE_URL value into a dialect and a
// driver data source name; an empty URL means the SQLite file in dataDir.
func dataSource(rawURL, dataDir string, syncNormal bool) (dialect, string, string, error) {
	switch {
	case rawURL == "":
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return dialect{}, "", "", fmt.Errorf("audit: create data dir: %w", err)
		}
		path := filepath.Join(dataDir, "retryaudit.db")
		if err := privateFile(path); err != nil {
			return dialect{}, "", "", err
		}
		return sqliteDialect, sqliteDSN(path, syncNormal), path, nil
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		if path == "" {
			return dialect{}, "", "", fmt.Errorf("audit: sqlite: URL names no file")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return dialect{}, "", "", fmt.Errorf("audit: create directory for %s: %w", path, err)
		}
		if err := privateFile(path); err != nil {
			return dialect{}, "", "", err
		}
		return sqliteDialect, sqliteDSN(path, syncNormal), path, nil
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		u, err := url.Parse(rawURL)
		if err != nil {
			return dialect{}, "", "", fmt.Errorf("audit: database URL is not a URL")
		}
		q := u.Query()
		if q.Get("connect_timeout") == "" {
			q.Set("connect_timeout", "5")
		}
		u.RawQuery = q.Encode()
		return postgresDialect, u.String(), u.Redacted(), nil
	}
	return dialect{}, "", "", fmt.Errorf("audit: database URL must start with postgres://, postgresql:// or sqlite:")
}

// privateFile creates the SQLite file with mode 0600 before SQLite opens it
// (SQLite would create it 0644, and its -wal and -shm files take the
// database's mode), and narrows an existing file that others could read.
func privateFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && st.Mode().Perm()&0o077 != 0 {
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			os.Chmod(p, 0o600) // best effort: a file of another owner stays as it is
		}
	}
	return nil
}

// sqliteDSN opens the file in WAL mode with foreign keys on, waits up to five
// seconds for a lock held by another process, and starts every transaction
// as a writer so that two transactions never deadlock upgrading their locks.
// synchronous=FULL makes every commit durable when it is answered (the
// group commit makes that one fsync per batch); NORMAL, when asked for, may
// lose the last commits on an OS crash or power loss.
func sqliteDSN(path string, syncNormal bool) string {
	sync := "FULL"
	if syncNormal {
		sync = "NORMAL"
	}
	return path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(" + sync + ")&_txlock=immediate"
}

// A row set is how a batch hands its rows to one statement: a fixed query
// text whatever the batch's size, so that it is prepared once.
// PostgreSQL takes one text array per column and unnests them; SQLite, one
// JSON array of rows, read with json_each. Every column is text: statements
// cast what is not.

// rowSet returns the subquery that yields the columns, named as given.
func (d dialect) rowSet(cols ...string) string {
	var b strings.Builder
	if d.name == "postgres" {
		b.WriteString("SELECT * FROM unnest(")
		for i := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("?::text[]")
		}
		b.WriteString(") AS r(" + strings.Join(cols, ", ") + ")")
		return b.String()
	}
	b.WriteString("SELECT ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "j.value->>%d AS %s", i, c)
	}
	b.WriteString(" FROM json_each(?) AS j")
	return b.String()
}

// rowArgs returns the arguments of a row set of n columns.
func (d dialect) rowArgs(n int, rows [][]string) []any {
	if d.name == "postgres" {
		cols := make([]any, n)
		for c := 0; c < n; c++ {
			col := make([]string, len(rows))
			for i, r := range rows {
				col[i] = r[c]
			}
			cols[c] = pq.Array(col)
		}
		return cols
	}
	raw, _ := json.Marshal(rows) // strings only: it cannot fail
	return []any{string(raw)}
}

// tsParam is a time parameter where its type is not known from a column (a
// SELECT list): PostgreSQL must be told; SQLite keeps it as the text it is.
func (d dialect) tsParam() string {
	if d.name == "postgres" {
		return "CAST(? AS timestamptz)"
	}
	return "?"
}
