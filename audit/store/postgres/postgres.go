// Package postgres is the store's PostgreSQL driver: the production
// database, shared by several instances of the service.
package postgres

import (
	"cmp"
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/retryaudit/retryaudit/audit/store/driver"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// Driver is the PostgreSQL driver.
type Driver struct {
	// TransactionPooling says that the connections are a transaction
	// pooler's (PgBouncer with pool_mode = transaction; the URL's
	// pgbouncer=true): a server connection serves a client for one
	// transaction at a time, so nothing may outlive a transaction. No
	// statement is prepared, lock_timeout is set in each write transaction
	// (SET LOCAL) instead of each connection, and migrations take a lock
	// kept in a table instead of a session's advisory lock.
	TransactionPooling bool
}

var (
	_ driver.Driver = Driver{}
	_ driver.Pooled = Driver{}
)

// DataSource turns a postgres:// or postgresql:// URL into the data source
// name to open and the URL without its password, for messages. A connect
// timeout of 5 seconds is added unless the URL sets one.
//
// Hosts listed in the URL's host part (postgres://u@h1:5432,h2:5433/db, the
// form libpq and other drivers accept) are moved to lib/pq's form,
// ?host=h1,h2&port=5432,5433. With several hosts a new connection goes to
// the one that takes writes (target_session_attrs=read-write, unless the
// URL sets it). pgbouncer=true is retryaudit's own option (see
// Driver.TransactionPooling), taken out of the URL; it turns lib/pq's
// binary_parameters on, so that a statement's parse, parameters and
// execution go in one message, which needs no session: otherwise lib/pq
// parses in one round trip and binds in the next, which PgBouncer may send
// to another server connection ("unnamed prepared statement does not
// exist").
func DataSource(rawURL string) (dsn, where string, pooled bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", false, fmt.Errorf("audit: database URL is not a URL")
	}
	q := u.Query()
	if strings.Contains(u.Host, ",") {
		if q.Has("host") || q.Has("port") {
			return "", "", false, fmt.Errorf("audit: database URL lists its hosts twice, in its host part and in ?host= or ?port=: keep one")
		}
		var hosts, ports []string
		for _, hp := range strings.Split(u.Host, ",") {
			h, p, err := net.SplitHostPort(hp)
			if err != nil { // no port: PostgreSQL's
				h, p = strings.Trim(hp, "[]"), "5432"
			}
			if h == "" {
				return "", "", false, fmt.Errorf("audit: database URL has an empty host in %q", u.Host)
			}
			hosts, ports = append(hosts, h), append(ports, p)
		}
		q.Set("host", strings.Join(hosts, ","))
		q.Set("port", strings.Join(ports, ","))
		u.Host = ""
	}
	if strings.Contains(q.Get("host"), ",") && !q.Has("target_session_attrs") {
		q.Set("target_session_attrs", "read-write") // not a standby: every write would fail there
	}
	if v := q.Get("pgbouncer"); q.Has("pgbouncer") {
		if pooled, err = strconv.ParseBool(v); err != nil {
			return "", "", false, fmt.Errorf("audit: database URL has pgbouncer=%q: want true or false", v)
		}
		q.Del("pgbouncer")
		if pooled && !q.Has("binary_parameters") {
			q.Set("binary_parameters", "yes")
		}
	}
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", "5")
	}
	u.RawQuery = q.Encode()
	return u.String(), u.Redacted(), pooled, nil
}

// Name returns "postgres".
func (Driver) Name() string { return "postgres" }

// Open opens a pool whose every connection runs with a lock_timeout: a
// statement that meets a row locked by another session (a transaction from
// n8n's Postgres node, say) fails with 55P03 after it, instead of holding a
// pooled connection for as long as the lock lasts. The setting is made per
// connection with SET, which PgBouncer's session pooling keeps; behind
// transaction pooling, where it would stay on whichever server connection
// ran it, the store sets it in each write transaction instead (TxSetup).
//
// Every connection is kept while in use: one closed after a burst is a new
// server process and its statements prepared again at the next (at 32
// clients that was most of a claim's time). Idle ones go after a while.
func (d Driver) Open(dsn string, o driver.Options) (*sqlx.DB, error) {
	c, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	var conn sqldriver.Connector = sessionConnector{Connector: c, setup: lockTimeout(o, "SET")}
	if d.TransactionPooling {
		conn = c
	}
	db := sqlx.NewDb(sql.OpenDB(conn), "postgres")
	conns := cmp.Or(o.MaxConns, 20)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// TxSetup returns SET LOCAL lock_timeout behind a transaction pooler, and
// nothing otherwise (Open set it on the connection).
func (d Driver) TxSetup(o driver.Options) string {
	if !d.TransactionPooling {
		return ""
	}
	return lockTimeout(o, "SET LOCAL")
}

func lockTimeout(o driver.Options, set string) string {
	return fmt.Sprintf("%s lock_timeout = %d", set, o.LockTimeout.Milliseconds())
}

// sessionConnector runs setup on each new connection.
type sessionConnector struct {
	*pq.Connector
	setup string
}

// Connect opens a connection and applies the session's settings.
func (c sessionConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if ex, ok := conn.(sqldriver.ExecerContext); ok {
		if _, err := ex.ExecContext(ctx, c.setup, nil); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// Exclusive returns nil: instances share a PostgreSQL database.
func (Driver) Exclusive(string) (io.Closer, error) { return nil, nil }

// Queries returns the statements of the sql/ files.
func (Driver) Queries() string { return driver.SQLFiles(sqlFiles) }

// Migrations migrates under a lock: instances starting together must not
// migrate at once. It is a session's advisory lock, or behind a transaction
// pooler, where a session lock would stay on whichever server connection
// took it, a row in the table retryaudit_migration_lock, held by renewing
// it (goose's table locker: a holder that dies loses it after 30 s).
func (d Driver) Migrations() (goose.Dialect, []goose.ProviderOption, error) {
	if d.TransactionPooling {
		locker, err := lock.NewPostgresTableLocker(lock.WithTableName("retryaudit_migration_lock"),
			lock.WithTableLockTimeout(time.Second, 300))
		if err != nil {
			return "", nil, fmt.Errorf("audit: migration lock: %w", err)
		}
		return goose.DialectPostgres, []goose.ProviderOption{goose.WithLocker(locker)}, nil
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return "", nil, fmt.Errorf("audit: migration lock: %w", err)
	}
	return goose.DialectPostgres, []goose.ProviderOption{goose.WithSessionLocker(locker)}, nil
}

// Time passes times as timestamptz, in UTC.
func (Driver) Time(t time.Time) any { return t.UTC() }

// Snapshot returns true: a page reads in one repeatable-read snapshot.
func (Driver) Snapshot() bool { return true }

// OneWriter returns false: writers run side by side under row locks.
func (Driver) OneWriter() bool { return false }

// Classify reads PostgreSQL's SQLSTATE.
func (Driver) Classify(err error) driver.Class {
	var e *pq.Error
	if !errors.As(err, &e) {
		return driver.Other
	}
	switch {
	case e.Code == "55P03": // lock_not_available: past lock_timeout
		return driver.Locked
	case e.Code == "40001" || e.Code == "40P01": // serialization failure, deadlock
		return driver.Retry
	case e.Code == "23505": // a key another session made since the batch read: decide again
		return driver.Retry
	case e.Code == "25006": // read_only_sql_transaction: a standby, or a primary being demoted
		return driver.Unavailable
	}
	switch e.Code.Class() {
	case "08", "53", "57", "58": // connection, resources, operator intervention, system
		return driver.Unavailable
	case "22": // data exception: a byte sequence it cannot store, a value out of range
		return driver.Refused
	}
	return driver.Other
}
