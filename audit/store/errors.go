package store

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store/driver"
)

// dbError wraps an error from the database with the operation that failed and
// classifies it: an unreachable, overloaded or closed database is unavailable
// (the caller may retry), anything else is internal.
func (s *Store) dbError(op string, err error) error {
	var e *audit.Error
	if errors.As(err, &e) {
		return err
	}
	class := s.drv.Classify(err)
	switch {
	case class == driver.Locked:
		return &audit.Error{Code: audit.CodeBusy, Message: op + ": " + audit.ErrLocked.Error() + " (for longer than the lock timeout)",
			Err: errors.Join(audit.ErrLocked, err)}
	case errors.Is(err, context.DeadlineExceeded) && s.answered():
		// The database answers others: this request waited for other
		// requests (their rows, the queue) until its deadline.
		return &audit.Error{Code: audit.CodeBusy, Message: op + ": waited past the request's deadline for other " +
			"requests of the same entries; the database answers", Err: err}
	case class == driver.Unavailable || unavailable(err):
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			s.lastDown.Store(time.Now().UnixNano())
		}
		return &audit.Error{Code: audit.CodeUnavailable, Message: op, Err: err}
	case class == driver.Refused:
		// Validation should have caught it; a 422 is still the truth.
		return &audit.Error{Code: audit.CodeInvalid, Message: "the database refused a value (" + op + ")", Err: err}
	}
	return &audit.Error{Code: audit.CodeInternal, Message: op, Err: err}
}

// unavailable reports the errors that mean the same on every database: a
// deadline, a lost or closed connection.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		// database/sql rolled the transaction back when its context ended.
		errors.Is(err, sql.ErrTxDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// database/sql reports a closed pool with an unexported error.
	return strings.Contains(err.Error(), "sql: database is closed")
}

// answered reports whether the database committed a transaction lately,
// and has not failed to answer since: a deadline met meanwhile is
// contention, not an outage.
func (s *Store) answered() bool {
	last := s.lastCommit.Load()
	return time.Since(time.Unix(0, last)) < answeredWithin && last > s.lastDown.Load()
}

// commitError classifies a failed commit. One the database refused was not
// recorded; one whose answer was lost (the connection broke after the
// commit was sent, as a proxy or a failover may do) may have been: it is
// answered as unknown, and the same request sent again is answered as it
// was (the same execution, by its run stamp, is held).
func (s *Store) commitError(err error) error {
	e := s.dbError("commit", err)
	if audit.ErrorCode(e) != audit.CodeUnavailable || s.drv.OneWriter() {
		return e // SQLite answers in-process: a failed commit rolled back
	}
	return &audit.Error{Code: audit.CodeUnknown, Message: "commit: the database's answer was lost; the request may " +
		"have been recorded", Err: err}
}

// overloaded is how a request that could not wait any longer is
// answered: busy while the database answers (it waited for other
// requests), unavailable when the database failed to answer since it last
// committed (it waited for a database that is down).
func (s *Store) overloaded(msg string) error {
	if s.lastDown.Load() > s.lastCommit.Load() {
		return &audit.Error{Code: audit.CodeUnavailable, Message: msg + ": the database does not answer"}
	}
	return &audit.Error{Code: audit.CodeBusy, Message: msg, Err: audit.ErrOverloaded}
}

// answeredWithin is how recent a commit must be for the database to count
// as answering: a database that stops answering fails new requests at once
// (refused, reset); only those already waiting meet their deadline, and for
// this long they are told busy.
const answeredWithin = 30 * time.Second

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// retryable reports whether a transaction failed only because it lost a race
// with another one (a serialization failure or deadlock): running it again is
// safe and will succeed or see the winner's result.
func (s *Store) retryable(err error) bool {
	return errors.Is(err, errDecideAgain) || s.drv.Classify(err) == driver.Retry
}
