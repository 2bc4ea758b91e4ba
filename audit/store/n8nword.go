package store

import (
	"context"
	"errors"

	"github.com/retryaudit/retryaudit/audit"
)

// askFor asks n8n's API about a claim's or an outcome's execution when its
// word is needed: the request carries no run stamp (n8n's start time then
// tells a reused id apart, and its lineage a Retry), it replays another
// execution's stamp (a Retry: n8n says of which, at any depth; or a
// person's run in the editor), or it says it retries another. A request
// that presents the stamp it made needs nothing from n8n: nothing is asked.
func (s *Store) askFor(ctx context.Context, id, stamp, mode, retryOf string) *audit.N8NWord {
	if s.lookup == nil || stamp != "" && !audit.ManualMode(mode) && retryOf == "" && audit.StampMaker(stamp, id) == id {
		return nil
	}
	return s.askN8N(ctx, id)
}

// askN8N asks n8n's API about an execution (through its short-lived cache)
// and, when n8n says it is a Retry, about each execution up its chain, so
// that the decision has n8n's whole word; nil when no API is configured for
// the execution's instance. It runs before the request is queued, outside
// any transaction: no worker ever waits for n8n.
func (s *Store) askN8N(ctx context.Context, id string) *audit.N8NWord {
	if s.lookup == nil {
		return nil
	}
	x, err := s.lookup.Execution(ctx, id)
	if errors.Is(err, audit.ErrNoAPI) {
		return nil
	}
	w := &audit.N8NWord{Asked: true, Self: x, Err: err}
	if err != nil {
		return w
	}
	if w.Self.ID == "" {
		w.Self.ID = id
	}
	seen := map[string]bool{id: true}
	for parent := x.RetryOf; x.Mode == "retry" && parent != "" && !seen[parent] && len(w.Ancestors) < audit.MaxChain; parent = x.RetryOf {
		seen[parent] = true
		if x, err = s.lookup.Execution(ctx, parent); err != nil {
			break // what n8n said so far stands
		}
		if x.ID == "" {
			x.ID = parent
		}
		w.Ancestors = append(w.Ancestors, x)
	}
	return w
}
