package audit

import (
	"context"
	"errors"
	"time"
)

// ErrExecutionNotFound is returned by an ExecutionLookup when n8n does not
// know the execution (never saved, or pruned).
var ErrExecutionNotFound = errors.New("execution not found in n8n")

// ErrNotRetryable is returned when n8n refuses to retry an execution (409:
// it did not fail, or a retry of it is running).
var ErrNotRetryable = errors.New("n8n refused to retry the execution")

// N8NExecution is what n8n's public API says about an execution.
type N8NExecution struct {
	ID         string
	WorkflowID string
	Mode       string
	Status     string
	RetryOf    string
	StartedAt  time.Time
	StoppedAt  time.Time
}

// ExecutionLookup asks n8n about one execution. Implementations answer
// quickly (a short timeout, a cache) and return ErrExecutionNotFound for an
// unknown id, ErrNoAPI for an instance whose API is not configured.
type ExecutionLookup interface {
	Execution(ctx context.Context, id string) (N8NExecution, error)
}

// TouchedEvent is an event an execution touched, and how.
type TouchedEvent struct {
	EventKey
	Role     string
	Delivery Delivery
	At       time.Time
}
