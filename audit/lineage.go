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

// Execution is an n8n execution as the service knows it.
type Execution struct {
	ID           string `db:"execution_id" json:"execution_id"`
	WorkflowID   string `db:"workflow_id" json:"workflow_id,omitempty"`
	WorkflowName string `db:"workflow_name" json:"workflow_name,omitempty"`
	Mode         string `db:"mode" json:"mode,omitempty"`
	RetryOf      string `db:"retry_of" json:"retry_of,omitempty"`
	// ClaimedRetryOf is a retry_of a client sent that n8n did not confirm.
	ClaimedRetryOf string    `db:"claimed_retry_of" json:"claimed_retry_of,omitempty"`
	Root           string    `db:"root_execution_id" json:"root_execution_id"`
	URL            string    `db:"n8n_url" json:"n8n_url,omitempty"`
	Note           string    `db:"lineage_note" json:"lineage_note,omitempty"`
	FirstSeenAt    time.Time `db:"first_seen_at" json:"first_seen_at"`
	LastSeenAt     time.Time `db:"last_seen_at" json:"last_seen_at"`
}

// TouchedEvent is an event an execution touched, and how.
type TouchedEvent struct {
	EventKey
	Role     string    `db:"role"`
	Delivery string    `db:"delivery"`
	At       time.Time `db:"first_seen_at"`
}
