package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/lib/pq"
	"github.com/retryaudit/retryaudit/audit"
	"modernc.org/sqlite"
)

// dbError wraps an error from the database with the operation that failed and
// classifies it: an unreachable, overloaded or closed database is unavailable
// (the caller may retry), anything else is internal.
func dbError(op string, err error) error {
	var e *audit.Error
	if errors.As(err, &e) {
		return err
	}
	code := audit.CodeInternal
	switch {
	case locked(err):
		return &audit.Error{Code: audit.CodeUnavailable, Message: op + ": " + audit.ErrLocked.Error() + " (for longer than the lock timeout)",
			Err: errors.Join(audit.ErrLocked, err)}
	case unavailable(err):
		code = audit.CodeUnavailable
	case refusedValue(err):
		// Validation should have caught it; a 422 is still the truth.
		return &audit.Error{Code: audit.CodeInvalid, Message: "the database refused a value (" + op + ")", Err: err}
	}
	return &audit.Error{Code: code, Message: op, Err: err}
}

func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		// database/sql rolled the transaction back when its context ended.
		errors.Is(err, sql.ErrTxDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code.Class() {
		case "08", "53", "57", "58": // connection, resources, operator intervention, system
			return true
		}
		return false
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		switch liteErr.Code() & 0xff {
		case 5, 6, 7, 8, 9, 10, 13, 14: // BUSY, LOCKED, NOMEM, READONLY, INTERRUPT (a deadline), IOERR, FULL, CANTOPEN
			return true
		}
		return false
	}
	// database/sql reports a closed pool with an unexported error.
	return strings.Contains(err.Error(), "sql: database is closed")
}

func locked(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "55P03"
}

// refusedValue reports a PostgreSQL data exception (class 22: a byte
// sequence it cannot store, a value out of range).
func refusedValue(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code.Class() == "22"
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// retryable reports whether a transaction failed only because it lost a race
// with another one (PostgreSQL serialization failure or deadlock): running it
// again is safe and will succeed or see the winner's result.
func retryable(err error) bool {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return pqErr.Code == "40001" || pqErr.Code == "40P01"
	}
	return false
}
