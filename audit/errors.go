package audit

import (
	"errors"
	"fmt"
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
	// CodeBusy says the database is up but the request could not be
	// decided in time: it waited for other requests (the queue, or the
	// rows of its entries that other requests or sessions held).
	CodeBusy Code = "busy"
	// CodeUnknown says the request may or may not have been recorded: the
	// database's answer to its commit was lost. Sending the same request
	// again is safe: the same execution is answered as it was.
	CodeUnknown  Code = "unknown"
	CodeInternal Code = "internal"
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
	// Stale says a person's form was older than the entry's last change.
	Stale bool
	Err   error
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

func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrLocked is in the chain of an unavailable error when a row was locked
// by another session: for longer than the lock timeout, or as a batch
// began, which then does not wait for it.
var ErrLocked = errors.New("the row is locked by another database session")
