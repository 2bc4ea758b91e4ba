// Package sqlite is the store's SQLite driver: the embedded, zero-setup
// default, one file and one serving process.
package sqlite

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite" // the SQLite driver, pure Go

	"github.com/retryaudit/retryaudit/audit/store/driver"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// Driver is the SQLite driver.
type Driver struct{}

var _ driver.Driver = Driver{}

// TimeLayout is how times are stored: fixed width and UTC, so that comparing
// the strings compares the times.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// DataSource turns a sqlite:PATH URL, or an empty one (the file
// retryaudit.db in dataDir), into the data source name to open and the
// file's path. It creates the directory and the file, readable by its owner
// only.
func DataSource(rawURL, dataDir string, syncNormal bool) (dsn, path string, err error) {
	if rawURL == "" {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return "", "", fmt.Errorf("audit: create data dir: %w", err)
		}
		path = filepath.Join(dataDir, "retryaudit.db")
	} else {
		path = strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		if path == "" {
			return "", "", fmt.Errorf("audit: sqlite: URL names no file")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", "", fmt.Errorf("audit: create directory for %s: %w", path, err)
		}
	}
	if err := privateFile(path); err != nil {
		return "", "", err
	}
	return source(path, syncNormal), path, nil
}

// privateFile creates the file with mode 0600 before SQLite opens it
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

// source opens the file in WAL mode with foreign keys on, waits up to five
// seconds for a lock held by another process, and starts every transaction
// as a writer so that two transactions never deadlock upgrading their locks.
// synchronous=FULL makes every commit durable when it is answered (the
// group commit makes that one fsync per batch); NORMAL, when asked for, may
// lose the last commits on an OS crash or power loss.
func source(path string, syncNormal bool) string {
	sync := "FULL"
	if syncNormal {
		sync = "NORMAL"
	}
	return path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(" + sync + ")&_txlock=immediate"
}

// Name returns "sqlite".
func (Driver) Name() string { return "sqlite" }

// Open opens a small pool: one writer, readers beside it (WAL).
func (Driver) Open(dsn string, _ driver.Options) (*sqlx.DB, error) {
	db, err := sqlx.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	return db, nil
}

// Exclusive takes an exclusive advisory lock on the file where.lock, which
// the operating system releases when the process ends, however it ends.
// SQLite allows one serving process per file: a second one would run the
// background jobs twice.
func (Driver) Exclusive(where string) (io.Closer, error) {
	path := where + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("audit: another retryaudit process is serving %s (lock %s is held); "+
				"SQLite is single-instance: stop the other process, or use PostgreSQL for several instances",
				where, path)
		}
		return nil, fmt.Errorf("audit: lock %s: %w", path, err)
	}
	return f, nil
}

// Queries returns the statements of the sql/ files.
func (Driver) Queries() string { return driver.SQLFiles(sqlFiles) }

// Migrations needs no lock: one process serves the file.
func (Driver) Migrations() (goose.Dialect, []goose.ProviderOption, error) {
	return goose.DialectSQLite3, nil, nil
}

// Time passes times as fixed-width UTC text (TimeLayout).
func (Driver) Time(t time.Time) any { return t.UTC().Format(TimeLayout) }

// Snapshot returns false: a transaction would take the write lock, and
// reads beside the one writer are consistent enough for a page.
func (Driver) Snapshot() bool { return false }

// OneWriter returns true.
func (Driver) OneWriter() bool { return true }

// Classify reads SQLite's primary result code.
func (Driver) Classify(err error) driver.Class {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return driver.Other
	}
	switch e.Code() & 0xff {
	case 5, 6, 7, 8, 9, 10, 13, 14: // BUSY, LOCKED, NOMEM, READONLY, INTERRUPT (a deadline), IOERR, FULL, CANTOPEN
		return driver.Unavailable
	}
	return driver.Other
}
