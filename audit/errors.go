package audit

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/lib/pq"
	"modernc.org/sqlite"
)

// Code classifies a domain error so that callers can act on it without
// reading its text: handlers map it to an HTTP status in one place.
type Code string

// The codes an audit error can carry.
const (
	CodeInvalid  Code = "invalid"
	CodeNotFound Code = "not_found"
	CodeConflict Code = "conflict"
	// CodeNotHolder refuses a transition reported by an execution that does
	// not hold the entry; Holder names the one that does.
	CodeNotHolder   Code = "not_holder"
	CodeUnavailable Code = "unavailable"
	CodeInternal    Code = "internal"
)

// Error is a domain error. Fields names each invalid input field with what is
// wrong with it; Status carries the entry's current status for conflicts, and
// Holder the execution that holds it.
type Error struct {
	Code    Code
	Message string
	Fields  map[string]string
	Status  Status
	Holder  string
	Err     error
}

// Error returns the message, prefixed with the package.
func (e *Error) Error() string {
	if e.Err != nil {
		return "audit: " + e.Message + ": " + e.Err.Error()
	}
	return "audit: " + e.Message
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the code of err: the code of the first *Error in its
// chain, or CodeInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// dbError wraps an error from the database with the operation that failed and
// classifies it: an unreachable, overloaded or closed database is unavailable
// (the caller may retry), anything else is internal.
func dbError(op string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	code := CodeInternal
	switch {
	case locked(err):
		return &Error{Code: CodeUnavailable, Message: op + ": " + ErrLocked.Error() + " (for longer than the lock timeout)",
			Err: errors.Join(ErrLocked, err)}
	case unavailable(err):
		code = CodeUnavailable
	case refusedValue(err):
		// Validation should have caught it; a 422 is still the truth.
		return &Error{Code: CodeInvalid, Message: "the database refused a value (" + op + ")", Err: err}
	}
	return &Error{Code: code, Message: op, Err: err}
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

// ErrLocked is in the chain of an unavailable error when a row was locked
// by another session: for longer than the lock timeout, or as a batch
// began, which then does not wait for it.
var ErrLocked = errors.New("the row is locked by another database session")

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
