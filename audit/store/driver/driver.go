// Package driver is what the store asks of a database: the operations in
// which PostgreSQL and SQLite differ, behind one interface, with one
// implementation per database (packages postgres and sqlite). The store's
// business code calls these operations and runs the named statements of the
// drivers' .sql files; it never asks which database it is on.
package driver

import (
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
)

// Driver is one database's side of the store.
type Driver interface {
	// Name is "postgres" or "sqlite"; it is also the migrations folder.
	Name() string
	// Open opens a connection pool on the data source name, set up and
	// sized for this database.
	Open(dsn string, o Options) (*sqlx.DB, error)
	// Exclusive keeps a second process from serving the same database when
	// the database cannot share (SQLite); nil when it can.
	Exclusive(where string) (io.Closer, error)
	// Queries is the text of the driver's .sql files (SQLFiles): the
	// statements in which it differs from the store's own sql/ files.
	Queries() string
	// Migrations returns goose's dialect and the provider's options.
	Migrations() (goose.Dialect, []goose.ProviderOption, error)
	// Time converts a time into a query argument.
	Time(t time.Time) any
	// Snapshot reports whether a page reads in one read-only snapshot.
	// Without, it reads outside a transaction (SQLite, where a transaction
	// would take the write lock).
	Snapshot() bool
	// OneWriter reports whether the database admits one write transaction
	// at a time (SQLite): the store then queues writers itself, where a
	// request's deadline is respected, and runs one batch at a time.
	OneWriter() bool
	// Classify says what an error from the database means.
	Classify(err error) Class
}

// Pooled is implemented by a driver whose connections may be a transaction
// pooler's (PgBouncer with pool_mode = transaction), where a server
// connection serves a client for one transaction and nothing may outlive
// it. TxSetup returns the statement that begins each write transaction in
// place of the settings a session would keep, or "" when the connections
// keep their sessions; when it returns one, the store prepares no statement
// either.
type Pooled interface {
	TxSetup(o Options) string
}

// Class is what an error from the database means to the store.
type Class int

// The classes of errors a driver tells apart.
const (
	Other       Class = iota // internal
	Unavailable              // unreachable, overloaded, interrupted: retry later
	Locked                   // a row another session holds, past the lock timeout
	Refused                  // a value the database cannot store
	Retry                    // a serialization failure or deadlock: run the transaction again
)

// Options size and set up a pool.
type Options struct {
	MaxConns    int           // PostgreSQL: the pool's size
	LockTimeout time.Duration // PostgreSQL: every statement's wait for a lock
}

// SQLFiles returns the text of every sql/*.sql file in fsys, one after the
// other in the order of their names: a package's statements, kept a file a
// table.
func SQLFiles(fsys fs.FS) string {
	names, err := fs.Glob(fsys, "sql/*.sql")
	if err != nil || len(names) == 0 {
		panic("driver: no sql/*.sql files embedded")
	}
	var b strings.Builder
	for _, n := range names { // fs.Glob returns them sorted
		text, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic("driver: " + err.Error())
		}
		b.Write(text)
		b.WriteString("\n")
	}
	return b.String()
}
