package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// maxChain bounds every walk up a retryOf chain: a person pressing Retry
// fifty times on one execution is already beyond what the pages should show.
const maxChain = 50

// executionRecord is what one report says about an execution; empty fields
// say nothing and keep what is known. RetryOf is lineage that n8n told the
// service (its API, or an Error Trigger payload); ClaimedRetryOf is what a
// client said, kept for the history but never trusted.
type executionRecord struct {
	ID, WorkflowID, WorkflowName, Mode, RetryOf, ClaimedRetryOf, URL, Note string
}

// recordExecution writes what a report says about an execution and returns
// its chain: the execution, then the ones it retries, nearest first, by the
// lineage n8n confirmed. The first retryOf n8n gave for an execution stays:
// n8n never changes it.
//
// An execution id already known under another workflow is not the same
// execution (a second n8n, or one whose database was reset): nothing is
// merged into the known one, and the chain is empty, so that it holds
// nothing and is a retry of nothing.
func (s *Store) recordExecution(ctx context.Context, tx *sqlx.Tx, e executionRecord, now time.Time) ([]string, error) {
	if e.WorkflowID != "" {
		var known string
		err := s.get(ctx, tx, &known, "read execution", s.q.ReadExecutionWorkflow, e.ID)
		if err != nil && !isNoRows(err) {
			return nil, err
		}
		if known != "" && known != e.WorkflowID {
			return nil, nil
		}
	}
	root := e.ID
	if e.RetryOf != "" {
		root = e.RetryOf
		if _, err := s.namedGet(ctx, tx, &root, "read lineage",
			s.q.ReadRootExecution, map[string]any{"id": e.RetryOf}); err != nil {
			return nil, err
		}
	}
	arg := map[string]any{
		"id": e.ID, "workflow_id": e.WorkflowID, "workflow_name": e.WorkflowName, "mode": e.Mode,
		"retry_of": e.RetryOf, "claimed_retry_of": e.ClaimedRetryOf, "root": root, "url": e.URL, "note": e.Note,
		"now": s.t(now),
	}
	var retryOf string
	if _, err := s.namedGet(ctx, tx, &retryOf, "record execution", s.q.UpsertExecution, arg); err != nil {
		return nil, err
	}
	if e.RetryOf != "" && retryOf == e.RetryOf {
		// Executions and errors seen before this link took this one for
		// their root: move them under the real one.
		if _, err := s.namedExec(ctx, tx, "re-root executions", s.q.ReRootExecutions, arg); err != nil {
			return nil, err
		}
		if _, err := s.namedExec(ctx, tx, "re-root errors", s.q.ReRootErrors, arg); err != nil {
			return nil, err
		}
	}
	return s.chainFrom(ctx, tx, e.ID, retryOf)
}

// conflictNote says why an execution id was not taken for the known one.
func conflictNote(id, workflowID string) string {
	return fmt.Sprintf("execution %s of workflow %s is not the execution %s the service knows (another workflow): "+
		"a second n8n, or one whose database was reset; nothing was recorded", id, workflowID, id)
}

// chainFrom walks up from an execution whose parent is known.
func (s *Store) chainFrom(ctx context.Context, q any, id, parent string) ([]string, error) {
	chain := []string{id}
	for parent != "" && len(chain) < maxChain {
		if slices.Contains(chain, parent) {
			return chain, nil // a cycle: n8n never makes one
		}
		chain = append(chain, parent)
		next := ""
		if err := s.get(ctx, q, &next, "read lineage",
			s.q.ReadRetryOf, parent); err != nil && !isNoRows(err) {
			return nil, err
		}
		parent = next
	}
	return chain, nil
}

// lineage is what n8n's API said about an execution that presents a key
// another execution holds.
type lineage struct {
	retryOf string // n8n's retryOf of the execution, verified
	mode    string
	note    string
	hops    []audit.N8NExecution // ancestors learned from the API, nearest first
	// complete: the walk ended at an execution that is no retry, so the
	// chain is whole whoever holds the entry; a batch may decide the
	// claim after another of the same entry.
	complete bool
}

// lineageKey names the entry whose holder a lineage lookup is about.
type lineageKey struct {
	Source, EventID string
	Items           []string // a claim's items; the one item of an outcome
	ExecutionID     string
	ClaimedRetryOf  string // a client's retry_of, to be verified
	// Failed also looks at failed entries: an outcome of a Retry of the
	// execution that reported failed moves the entry, a claim captures it
	// anyway.
	Failed bool
}

// learnLineage finds out whether an execution that presents a key another
// execution holds is a Retry of the holder (at any depth). It walks up from
// the execution through what the service knows from n8n already, and asks
// n8n's API for each step it does not know. It runs before the caller's
// transaction and holds no connection while it waits; whatever n8n answers,
// the decision is still made by the conditional statements. When n8n cannot
// tell, or no n8n API is configured, the execution is no retry, the safe
// answer, and the note says why.
func (s *Store) learnLineage(ctx context.Context, k lineageKey) lineage {
	holder, err := s.otherHolder(ctx, k)
	if err != nil || holder == "" {
		return lineage{}
	}
	var lin lineage
	id := k.ExecutionID
	for depth := 0; depth < maxChain && id != holder; depth++ {
		known, x, err := s.knownLineage(ctx, id)
		if err != nil {
			return lineage{note: "could not read the lineage: treated as no retry"}
		}
		if !known {
			noAPI := s.lookup == nil
			if !noAPI {
				x, err = s.lookup.Execution(ctx, id)
				noAPI = errors.Is(err, audit.ErrNoAPI)
			}
			if noAPI {
				if k.ClaimedRetryOf != "" {
					lin.note = fmt.Sprintf("retry_of %s not verified: configure the n8n API "+
						"(RETRYAUDIT_N8N_API_URL) to have retries recognised", k.ClaimedRetryOf)
				}
				return lin
			}
			if err != nil {
				lin.note = fmt.Sprintf("n8n could not say whether execution %s is a retry (%v): treated as a redelivery", id, err)
				break
			}
			if depth == 0 {
				lin.mode, lin.retryOf = x.Mode, x.RetryOf
			} else {
				lin.hops = append(lin.hops, x)
			}
		}
		if x.Mode != "retry" || x.RetryOf == "" {
			lin.complete = true
			if depth == 0 {
				lin.note = fmt.Sprintf("n8n: execution %s has mode %q, it is no retry", id, x.Mode)
			} else {
				lin.note = fmt.Sprintf("n8n: execution %s retries %s, not the holder %s", k.ExecutionID, x.ID, holder)
			}
			break
		}
		if x.RetryOf == holder {
			lin.note = fmt.Sprintf("n8n: execution %s is a retry of the holder %s", k.ExecutionID, holder)
		}
		id = x.RetryOf
	}
	if k.ClaimedRetryOf != "" && k.ClaimedRetryOf != lin.retryOf {
		if known, x, _ := s.knownLineage(ctx, k.ExecutionID); !known || x.RetryOf != k.ClaimedRetryOf {
			lin.note = strings.TrimPrefix(lin.note+fmt.Sprintf("; the retry_of %s it sent is not n8n's", k.ClaimedRetryOf), "; ")
		}
	}
	return lin
}

// knownLineage returns what the service knows from n8n about an execution's
// place in a retry chain: known is false when it knows nothing (the
// execution is unseen, or seen only in claims).
func (s *Store) knownLineage(ctx context.Context, id string) (bool, audit.N8NExecution, error) {
	var x struct {
		RetryOf    string `db:"retry_of"`
		Mode       string `db:"mode"`
		WorkflowID string `db:"workflow_id"`
	}
	err := s.get(ctx, s.db, &x, "read lineage", s.q.ReadKnownLineage, id)
	if isNoRows(err) {
		return false, audit.N8NExecution{}, nil
	}
	if err != nil {
		return false, audit.N8NExecution{}, err
	}
	return true, audit.N8NExecution{ID: id, Mode: x.Mode, RetryOf: x.RetryOf, WorkflowID: x.WorkflowID}, nil
}

// otherHolder returns the execution holding the key (or one of its items)
// when that is not the caller.
func (s *Store) otherHolder(ctx context.Context, k lineageKey) (string, error) {
	statuses := []string{string(audit.StatusProcessing)}
	if k.Failed {
		statuses = append(statuses, string(audit.StatusFailed))
	}
	query := s.q.OtherEventHolder
	arg := map[string]any{"source": k.Source, "event_id": k.EventID, "statuses": statuses, "caller": k.ExecutionID}
	if len(k.Items) > 0 {
		arg["items"] = k.Items
		query = s.q.OtherItemHolder
	}
	var holder string
	_, err := s.namedGet(ctx, s.db, &holder, "read holder", query, arg)
	return holder, err
}

// Lineage returns an execution, the chain above it (nearest first) and the
// executions that retry it.
func (s *Store) Lineage(ctx context.Context, id string) (audit.Execution, []audit.Execution, []audit.Execution, error) {
	var x audit.Execution
	if err := audit.ValidateExecutionID(id); err != nil {
		return x, nil, nil, err
	}
	err := s.get(ctx, s.db, &x, "read execution", s.q.ReadExecution, id)
	if isNoRows(err) {
		return x, nil, nil, audit.Errorf(audit.CodeNotFound, "no execution %s", id)
	}
	if err != nil {
		return x, nil, nil, err
	}
	chain, err := s.chainFrom(ctx, s.db, x.ID, x.RetryOf)
	if err != nil {
		return x, nil, nil, err
	}
	var up []audit.Execution
	for _, a := range chain[1:] {
		var e audit.Execution
		err := s.get(ctx, s.db, &e, "read execution", s.q.ReadExecution, a)
		if isNoRows(err) {
			e = audit.Execution{ID: a, Note: "not seen by the service"}
		} else if err != nil {
			return x, nil, nil, err
		}
		up = append(up, e)
	}
	var down []audit.Execution
	err = s.selectAll(ctx, s.db, &down, "read retries", s.q.ReadRetries, id)
	return x, up, down, err
}

// ExecutionEvents returns the events an execution touched.
func (s *Store) ExecutionEvents(ctx context.Context, id string) ([]audit.TouchedEvent, error) {
	var out []audit.TouchedEvent
	err := s.selectAll(ctx, s.db, &out, "read touched events", s.q.ReadTouchedEvents, id)
	return out, err
}
