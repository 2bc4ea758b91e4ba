package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// maxChain bounds every walk up a retryOf chain: a person pressing Retry
// fifty times on one execution is already beyond what the pages should show.
const maxChain = 50

// ErrExecutionNotFound is returned by an ExecutionLookup when n8n does not
// know the execution (never saved, or pruned).
var ErrExecutionNotFound = errors.New("execution not found in n8n")

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
// unknown id.
type ExecutionLookup interface {
	Execution(ctx context.Context, id string) (N8NExecution, error)
}

// Execution is an n8n execution as the service knows it.
type Execution struct {
	ID           string    `db:"execution_id" json:"execution_id"`
	WorkflowID   string    `db:"workflow_id" json:"workflow_id,omitempty"`
	WorkflowName string    `db:"workflow_name" json:"workflow_name,omitempty"`
	Mode         string    `db:"mode" json:"mode,omitempty"`
	RetryOf      string    `db:"retry_of" json:"retry_of,omitempty"`
	Root         string    `db:"root_execution_id" json:"root_execution_id"`
	URL          string    `db:"n8n_url" json:"n8n_url,omitempty"`
	Note         string    `db:"lineage_note" json:"lineage_note,omitempty"`
	FirstSeenAt  time.Time `db:"first_seen_at" json:"first_seen_at"`
	LastSeenAt   time.Time `db:"last_seen_at" json:"last_seen_at"`
}

// executionRecord is what one report says about an execution; empty fields
// say nothing and keep what is known.
type executionRecord struct {
	ID, WorkflowID, WorkflowName, Mode, RetryOf, URL, Note string
}

const upsertExecution = `INSERT INTO executions (execution_id, workflow_id, workflow_name, mode, retry_of,
	root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at)
	VALUES (:id, :workflow_id, :workflow_name, :mode, :retry_of, :root, :url, :note, :now, :now)
	ON CONFLICT (execution_id) DO UPDATE SET
	workflow_id = CASE WHEN excluded.workflow_id <> '' THEN excluded.workflow_id ELSE executions.workflow_id END,
	workflow_name = CASE WHEN excluded.workflow_name <> '' THEN excluded.workflow_name ELSE executions.workflow_name END,
	mode = CASE WHEN excluded.mode <> '' THEN excluded.mode ELSE executions.mode END,
	n8n_url = CASE WHEN excluded.n8n_url <> '' THEN excluded.n8n_url ELSE executions.n8n_url END,
	lineage_note = CASE WHEN excluded.lineage_note <> '' THEN excluded.lineage_note ELSE executions.lineage_note END,
	root_execution_id = CASE WHEN executions.retry_of = '' THEN excluded.root_execution_id
		ELSE executions.root_execution_id END,
	retry_of = CASE WHEN executions.retry_of = '' THEN excluded.retry_of ELSE executions.retry_of END,
	last_seen_at = excluded.last_seen_at
	RETURNING retry_of`

// recordExecution writes what a report says about an execution and returns
// its chain: the execution, then the ones it retries, nearest first. The
// first retryOf learned for an execution stays: n8n never changes it.
func (s *Store) recordExecution(ctx context.Context, tx *sqlx.Tx, e executionRecord, now time.Time) ([]string, error) {
	root := e.ID
	if e.RetryOf != "" {
		root = e.RetryOf
		if _, err := s.namedGet(ctx, tx, &root, "read lineage",
			`SELECT root_execution_id FROM executions WHERE execution_id = :id`, map[string]any{"id": e.RetryOf}); err != nil {
			return nil, err
		}
	}
	arg := map[string]any{
		"id": e.ID, "workflow_id": e.WorkflowID, "workflow_name": e.WorkflowName, "mode": e.Mode,
		"retry_of": e.RetryOf, "root": root, "url": e.URL, "note": e.Note, "now": s.d.t(now),
	}
	var retryOf string
	if _, err := s.namedGet(ctx, tx, &retryOf, "record execution", upsertExecution, arg); err != nil {
		return nil, err
	}
	if e.RetryOf != "" && retryOf == e.RetryOf {
		// Executions and errors seen before this link took this one for
		// their root: move them under the real one.
		if _, err := s.namedExec(ctx, tx, "re-root executions", `UPDATE executions SET root_execution_id = :root
			WHERE root_execution_id = :id AND execution_id <> :id`, arg); err != nil {
			return nil, err
		}
		if _, err := s.namedExec(ctx, tx, "re-root errors", `UPDATE n8n_errors SET root_execution_id = :root
			WHERE root_execution_id = :id`, arg); err != nil {
			return nil, err
		}
	}
	return s.chainFrom(ctx, tx, e.ID, retryOf)
}

// chainFrom walks up from an execution whose parent is known.
func (s *Store) chainFrom(ctx context.Context, q any, id, parent string) ([]string, error) {
	chain := []string{id}
	for parent != "" && len(chain) < maxChain {
		for _, seen := range chain {
			if seen == parent {
				return chain, nil // a cycle: n8n never makes one, but a caller's retry_of could
			}
		}
		chain = append(chain, parent)
		next := ""
		if err := s.get(ctx, q, &next, "read lineage",
			`SELECT retry_of FROM executions WHERE execution_id = ?`, parent); err != nil && !isNoRows(err) {
			return nil, err
		}
		parent = next
	}
	return chain, nil
}

// lineage is what n8n's API said about a claiming execution.
type lineage struct {
	retryOf string
	mode    string
	note    string
	hops    []N8NExecution // ancestors learned from the API, nearest first
}

// learnLineage asks n8n whether an execution the service has never seen,
// presenting a key that another execution holds, is a Retry of the holder.
// It runs before the claim's transaction and holds no connection while it
// waits; whatever n8n answers, the claim's decision is still made by the
// conditional statements. When n8n cannot tell, the claim is a redelivery,
// the safe answer, and the note says why.
func (s *Store) learnLineage(ctx context.Context, req ClaimRequest) lineage {
	if s.lookup == nil || req.RetryOf != "" {
		return lineage{}
	}
	holder, err := s.otherHolder(ctx, req)
	if err != nil || holder == "" {
		return lineage{}
	}
	var lin lineage
	id := req.ExecutionID
	for depth := 0; depth < maxChain; depth++ {
		x, err := s.lookup.Execution(ctx, id)
		if err != nil {
			lin.note = fmt.Sprintf("n8n could not say whether execution %s is a retry (%v): treated as a redelivery", id, err)
			break
		}
		if depth == 0 {
			lin.mode, lin.retryOf = x.Mode, x.RetryOf
		} else {
			lin.hops = append(lin.hops, x)
		}
		if x.Mode != "retry" || x.RetryOf == "" {
			if depth == 0 {
				lin.note = fmt.Sprintf("n8n: execution %s has mode %q, it is no retry", id, x.Mode)
			} else {
				lin.note = fmt.Sprintf("n8n: execution %s retries %s, not the holder %s", req.ExecutionID, x.ID, holder)
			}
			break
		}
		if x.RetryOf == holder {
			lin.note = fmt.Sprintf("n8n: execution %s is a retry of the holder %s", req.ExecutionID, holder)
			break
		}
		id = x.RetryOf
	}
	return lin
}

// otherHolder returns the execution holding the claim's key (or one of its
// items) when that is not the caller and the caller is new to the service.
func (s *Store) otherHolder(ctx context.Context, req ClaimRequest) (string, error) {
	query := `SELECT w.holder_execution_id FROM webhook_events w
		WHERE w.source = ? AND w.event_id = ? AND w.status = 'processing'
		AND w.holder_execution_id <> '' AND w.holder_execution_id <> ?
		AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.execution_id = ?)`
	if len(req.Items) > 0 {
		query = `SELECT i.holder_execution_id FROM event_items i
		WHERE i.source = ? AND i.event_id = ? AND i.status = 'processing'
		AND i.holder_execution_id <> '' AND i.holder_execution_id <> ?
		AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.execution_id = ?)
		ORDER BY i.updated_at DESC LIMIT 1`
	}
	var holder string
	err := s.get(ctx, s.db, &holder, "read holder", query, req.Source, req.EventID, req.ExecutionID, req.ExecutionID)
	if isNoRows(err) {
		return "", nil
	}
	return holder, err
}

// Lineage returns an execution, the chain above it (nearest first) and the
// executions that retry it.
func (s *Store) Lineage(ctx context.Context, id string) (Execution, []Execution, []Execution, error) {
	var x Execution
	if err := ValidateExecutionID(id); err != nil {
		return x, nil, nil, err
	}
	err := s.get(ctx, s.db, &x, "read execution", selectExecution+` WHERE execution_id = ?`, id)
	if isNoRows(err) {
		return x, nil, nil, errorf(CodeNotFound, "no execution %s", id)
	}
	if err != nil {
		return x, nil, nil, err
	}
	chain, err := s.chainFrom(ctx, s.db, x.ID, x.RetryOf)
	if err != nil {
		return x, nil, nil, err
	}
	var up []Execution
	for _, a := range chain[1:] {
		var e Execution
		err := s.get(ctx, s.db, &e, "read execution", selectExecution+` WHERE execution_id = ?`, a)
		if isNoRows(err) {
			e = Execution{ID: a, Note: "not seen by the service"}
		} else if err != nil {
			return x, nil, nil, err
		}
		up = append(up, e)
	}
	var down []Execution
	err = s.selectAll(ctx, s.db, &down, "read retries", selectExecution+` WHERE retry_of = ? ORDER BY first_seen_at`, id)
	return x, up, down, err
}

const selectExecution = `SELECT execution_id, workflow_id, workflow_name, mode, retry_of, root_execution_id,
	n8n_url, lineage_note, first_seen_at, last_seen_at FROM executions`

// TouchedEvent is an event an execution touched, and how.
type TouchedEvent struct {
	EventKey
	Role     string    `db:"role"`
	Delivery string    `db:"delivery"`
	At       time.Time `db:"first_seen_at"`
}

// ExecutionEvents returns the events an execution touched.
func (s *Store) ExecutionEvents(ctx context.Context, id string) ([]TouchedEvent, error) {
	var out []TouchedEvent
	err := s.selectAll(ctx, s.db, &out, "read touched events", `SELECT source, event_id, role, delivery,
		first_seen_at FROM event_executions WHERE execution_id = ? ORDER BY first_seen_at`, id)
	return out, err
}
