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
	"net/url"
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
type Driver struct{}

var _ driver.Driver = Driver{}

// DataSource turns a postgres:// or postgresql:// URL into the data source
// name to open and the URL without its password, for messages. A connect
// timeout of 5 seconds is added unless the URL sets one.
func DataSource(rawURL string) (dsn, where string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("audit: database URL is not a URL")
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", "5")
	}
	u.RawQuery = q.Encode()
	return u.String(), u.Redacted(), nil
}

// Name returns "postgres".
func (Driver) Name() string { return "postgres" }

// Open opens a pool whose every connection runs with a lock_timeout: a
// statement that meets a row locked by another session (a transaction from
// n8n's Postgres node, say) fails with 55P03 after it, instead of holding a
// pooled connection for as long as the lock lasts. The setting is made per
// connection with SET, which PgBouncer's session pooling keeps.
//
// Every connection is kept while in use: one closed after a burst is a new
// server process and its statements prepared again at the next (at 32
// clients that was most of a claim's time). Idle ones go after a while.
func (Driver) Open(dsn string, o driver.Options) (*sqlx.DB, error) {
	c, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	setup := fmt.Sprintf("SET lock_timeout = %d", o.LockTimeout.Milliseconds())
	db := sqlx.NewDb(sql.OpenDB(sessionConnector{Connector: c, setup: setup}), "postgres")
	conns := cmp.Or(o.MaxConns, 20)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
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

// Migrations migrates under a session lock: instances starting together
// must not migrate at once.
func (Driver) Migrations() (goose.Dialect, []goose.ProviderOption, error) {
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
	}
	switch e.Code.Class() {
	case "08", "53", "57", "58": // connection, resources, operator intervention, system
		return driver.Unavailable
	case "22": // data exception: a byte sequence it cannot store, a value out of range
		return driver.Refused
	}
	return driver.Other
}
