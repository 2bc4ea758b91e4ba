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
// say nothing and keep what is known. ID and RetryOf are the ids n8n gave
// (qualified with the instance); the store finds the execution it keeps
// under them. RetryOf is lineage that n8n told the service (its API, its
// hooks); ClaimedRetryOf is lineage someone reported that n8n did not
// confirm (a client's retry_of, an Error Trigger payload's retryOf), kept
// for the history but never trusted. Seen is what presents the id, with
// n8n's start time when n8n said it; Asked, that n8n's API was asked about
// it for this report (whatever it answered).
type executionRecord struct {
	ID, WorkflowID, WorkflowName, Mode, RetryOf, ClaimedRetryOf, URL, Note string
	Seen                                                                   audit.Sighting
	Asked                                                                  bool
	// Status is n8n's status of the execution when n8n said it (its hooks,
	// its API); Hook counts a report of n8n's execution hooks.
	Status string
	Hook   bool
}

// recorded is what recordExecution found out: the chain (the execution as
// the service keeps it, then the ones it retries, nearest first, by the
// lineage n8n confirmed; empty for an execution refused as not the one the
// service knows) and, when the id named a new execution reusing it, why.
type recorded struct {
	chain []string
	reset string
	root  string // the root of its chain, or of the lineage reported for it
}

// id is the execution as the service keeps it; "" when refused.
func (r recorded) id() string {
	if len(r.chain) == 0 {
		return ""
	}
	return r.chain[0]
}

// errAskN8N: the report names an execution whose identity n8n's API should
// confirm before the store may take it for the one it knows; the caller
// asks n8n (outside any transaction) and comes again.
var errAskN8N = errors.New("store: ask n8n's API about the execution first")

// identityRecheck is how long n8n's word on an execution's identity holds:
// an execution id seen again later is asked about again (the API
// configured), since n8n may have been restored meanwhile and handed the
// id out again. The n8n client caches its answers for no longer.
const identityRecheck = 10 * time.Second

// recordExecution writes what a report says about an execution and returns
// its chain. The execution is the one the service keeps under the id unless
// the report shows that the id names another one now (audit.Judge): then
// the known one is superseded, the new one kept under the id with its count
// (31~2), and one alert per instance says that n8n's ids started again. A
// report of an id that n8n's API should vouch for first (known, not checked
// lately) returns errAskN8N. The first retryOf n8n gave stays: n8n never
// changes it.
func (s *Store) recordExecution(ctx context.Context, tx *sqlx.Tx, e executionRecord, now time.Time) (recorded, error) {
	if audit.N8NID(e.ID) != e.ID {
		// An id spelled like one the service makes (31~2) is not an id
		// n8n gives: it names no execution of n8n's.
		return recorded{}, nil
	}
	id, incarnation, reset, err := s.identify(ctx, tx, e, now)
	if err != nil || id == "" {
		return recorded{reset: reset}, err
	}
	retryOf, parent := "", ""
	switch {
	case e.RetryOf != "":
		retryOf, err = s.currentID(ctx, tx, e.RetryOf)
		parent = retryOf
	case e.ClaimedRetryOf != "":
		// Reported lineage roots the execution under the one it names, so
		// that its errors link to that one's event for people to see; it
		// grants nothing (the chain follows n8n's lineage only).
		parent, err = s.currentID(ctx, tx, e.ClaimedRetryOf)
	}
	if err != nil {
		return recorded{}, err
	}
	root := id
	if parent != "" && parent != id {
		root = parent
		if _, err := s.namedGet(ctx, tx, &root, "read lineage",
			s.q.ExecutionReadRoot, map[string]any{"id": parent}); err != nil {
			return recorded{}, err
		}
	}
	var started, checked, ended any
	if !e.Seen.StartedAt.IsZero() {
		started, checked = s.t(e.Seen.StartedAt), s.t(now)
	}
	if finished(e.Status) {
		ended = s.t(now)
	}
	hook := 0
	if e.Hook {
		hook = 1
	}
	arg := map[string]any{
		"id": id, "raw_id": e.ID, "incarnation": incarnation, "workflow_id": e.WorkflowID, "workflow_name": e.WorkflowName,
		"mode": e.Mode, "retry_of": retryOf, "claimed_retry_of": e.ClaimedRetryOf, "root": root, "url": e.URL,
		"note": e.Note, "now": s.t(now), "started_at": started, "checked_at": checked, "ended_at": ended,
		"status": e.Status, "hook": hook,
	}
	var stored string
	if _, err := s.namedGet(ctx, tx, &stored, "record execution", s.q.ExecutionUpsert, arg); err != nil {
		return recorded{}, err
	}
	if root != id {
		// Executions and errors seen before this link took this one for
		// their root: move them under the real one.
		if _, err := s.namedExec(ctx, tx, "re-root executions", s.q.ExecutionReRoot, arg); err != nil {
			return recorded{}, err
		}
		if _, err := s.namedExec(ctx, tx, "re-root errors", s.q.ErrorReRoot, arg); err != nil {
			return recorded{}, err
		}
	}
	chain, err := s.chainFrom(ctx, tx, id, stored)
	return recorded{chain: chain, reset: reset, root: root}, err
}

// recordHops records the ancestors n8n's API told of, farthest first, so
// that each finds its parent recorded.
func (s *Store) recordHops(ctx context.Context, tx *sqlx.Tx, lin lineage, now time.Time) error {
	for i := len(lin.hops) - 1; i >= 0; i-- {
		h := lin.hops[i]
		rec := executionRecord{ID: h.ID, WorkflowID: h.WorkflowID, Mode: h.Mode, RetryOf: h.RetryOf, Status: h.Status,
			Seen: audit.Sighting{Kind: "api", WorkflowID: h.WorkflowID, StartedAt: h.StartedAt}, Asked: true}
		if _, err := s.recordExecution(ctx, tx, rec, now); err != nil {
			return err
		}
	}
	return nil
}

// joinNotes joins the notes that are not empty.
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
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
			s.q.ExecutionReadRetryOf, parent); err != nil && !isNoRows(err) {
			return nil, err
		}
		parent = next
	}
	return chain, nil
}

// lineage is what n8n said about an execution that presents a key: of the
// execution itself (self, asked whenever n8n's API is configured: its start
// time tells a reused id apart), and, when another execution holds the key,
// of its place in a retry chain.
type lineage struct {
	self    n8nWord
	retryOf string // n8n's retryOf of the execution, verified
	mode    string
	note    string
	hops    []audit.N8NExecution // ancestors learned from the API, nearest first
	// complete: the walk ended at an execution that is no retry, so the
	// chain is whole whoever holds the entry; a batch may decide the
	// claim after another of the same entry.
	complete bool
}

// noteFor is what the claim's answer says of the lineage: what n8n said,
// or, for an execution told to wait whose lineage was learned while nobody
// else held the key (in a batch, before a claim ahead of it took it), what
// n8n said of the execution itself, as the walk would have.
func (l lineage) noteFor(id string, d audit.Decision) string {
	if l.note != "" || d != audit.DecisionInProgress || !l.self.asked || l.self.err != nil ||
		l.self.x.Mode == "retry" && l.self.x.RetryOf != "" {
		return l.note
	}
	return fmt.Sprintf("n8n: execution %s has mode %q, it is no retry", audit.N8NID(id), l.self.x.Mode)
}

// n8nWord is what n8n's API said of an execution, asked just now.
type n8nWord struct {
	tried bool // the store asked (an instance without an API answers nothing)
	asked bool // n8n's API was asked (whatever it answered)
	x     audit.N8NExecution
	err   error
}

// startedAt is n8n's start time of the execution, when it said one.
func (w n8nWord) startedAt() time.Time {
	if !w.asked || w.err != nil {
		return time.Time{}
	}
	return w.x.StartedAt
}

// askN8N asks n8n's API about an execution (through its short-lived cache);
// the zero n8nWord when no API is configured for the execution's instance.
func (s *Store) askN8N(ctx context.Context, id string) n8nWord {
	if s.lookup == nil {
		return n8nWord{}
	}
	x, err := s.lookup.Execution(ctx, id)
	if errors.Is(err, audit.ErrNoAPI) {
		return n8nWord{tried: true}
	}
	return n8nWord{tried: true, asked: true, x: x, err: err}
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

// learnLineage asks n8n about an execution that presents a key and, when
// another execution holds the key, finds out whether it is a Retry of the
// holder (at any depth). With n8n's API configured every step is asked of
// n8n (its answers are cached for seconds, not trusted from before: ids
// start again after a restore); without, the walk follows what n8n told
// the service before (its hooks). It runs before the caller's transaction
// and holds no connection while it waits; whatever n8n answers, the
// decision is still made by the conditional statements. When n8n cannot
// tell, or nothing n8n said is known, the execution is no retry, the safe
// answer, and the note says why.
func (s *Store) learnLineage(ctx context.Context, k lineageKey) lineage {
	lin := lineage{self: s.askN8N(ctx, k.ExecutionID)}
	if lin.self.asked && lin.self.err == nil {
		// Its start time tells a reused id apart whoever holds the key;
		// its lineage is recorded only when another execution holds it.
		lin.complete = lin.self.x.Mode != "retry" || lin.self.x.RetryOf == ""
	}
	holder, err := s.otherHolder(ctx, k)
	if err != nil || holder == "" {
		return lin
	}
	if lin.self.asked {
		s.walkN8N(ctx, k, audit.N8NID(holder), &lin)
	} else {
		s.walkKnown(ctx, k, holder, &lin)
	}
	if k.ClaimedRetryOf != "" && k.ClaimedRetryOf != lin.retryOf {
		if known, x, _ := s.knownLineage(ctx, k.ExecutionID); !known || x.RetryOf != k.ClaimedRetryOf {
			lin.note = strings.TrimPrefix(lin.note+fmt.Sprintf("; the retry_of %s it sent is not n8n's", k.ClaimedRetryOf), "; ")
		}
	}
	return lin
}

// walkN8N walks up the chain through n8n's API, from the execution's own
// answer (lin.self) to the holder (as n8n names it).
func (s *Store) walkN8N(ctx context.Context, k lineageKey, holder string, lin *lineage) {
	w := lin.self
	for depth := 0; depth < maxChain; depth++ {
		if w.err != nil {
			lin.note = fmt.Sprintf("n8n could not say whether execution %s is a retry (%v): treated as a redelivery", w.x.ID, w.err)
			if w.x.ID == "" {
				lin.note = fmt.Sprintf("n8n could not say whether execution %s is a retry (%v): treated as a redelivery",
					k.ExecutionID, w.err)
			}
			return
		}
		x := w.x
		if depth == 0 {
			lin.mode, lin.retryOf = x.Mode, x.RetryOf
		} else {
			lin.hops = append(lin.hops, x)
		}
		if x.Mode != "retry" || x.RetryOf == "" {
			lin.complete = true
			if depth == 0 {
				lin.note = fmt.Sprintf("n8n: execution %s has mode %q, it is no retry", k.ExecutionID, x.Mode)
			} else {
				lin.note = fmt.Sprintf("n8n: execution %s retries %s, not the holder %s", k.ExecutionID, x.ID, holder)
			}
			return
		}
		if x.RetryOf == holder {
			lin.note = fmt.Sprintf("n8n: execution %s is a retry of the holder %s", k.ExecutionID, holder)
			// The holder too is asked: its start time tells whether the
			// holder the service knows is the execution n8n means.
			if h := s.askN8N(ctx, holder); h.asked && h.err == nil {
				lin.hops = append(lin.hops, h.x)
			}
			return
		}
		w = s.askN8N(ctx, x.RetryOf)
		if w.x.ID == "" {
			w.x.ID = x.RetryOf
		}
	}
}

// walkKnown walks up the chain through what n8n told the service before,
// from the execution the service now keeps under the id to the holder.
func (s *Store) walkKnown(ctx context.Context, k lineageKey, holder string, lin *lineage) {
	id, err := s.currentID(ctx, s.db, k.ExecutionID)
	if err != nil {
		lin.note = "could not read the lineage: treated as no retry"
		return
	}
	for depth := 0; depth < maxChain && id != holder; depth++ {
		known, x, err := s.knownLineage(ctx, id)
		switch {
		case err != nil:
			lin.note = "could not read the lineage: treated as no retry"
			return
		case !known:
			if k.ClaimedRetryOf != "" {
				lin.note = fmt.Sprintf("retry_of %s not verified: configure the n8n API "+
					"(RETRYAUDIT_N8N_API_URL) or n8n's execution hooks to have retries recognised", k.ClaimedRetryOf)
			}
			return
		case x.Mode == "retry" && x.RetryOf == "":
			lin.note = fmt.Sprintf("n8n did not confirm which execution %s retries: treated as a redelivery", id)
			return
		case x.Mode != "retry" || x.RetryOf == "":
			lin.complete = true
			if depth == 0 {
				lin.note = fmt.Sprintf("n8n: execution %s has mode %q, it is no retry", k.ExecutionID, x.Mode)
			} else {
				lin.note = fmt.Sprintf("n8n: execution %s retries %s, not the holder %s", k.ExecutionID, x.ID, holder)
			}
			return
		case x.RetryOf == holder:
			lin.note = fmt.Sprintf("n8n: execution %s is a retry of the holder %s", k.ExecutionID, holder)
		}
		id = x.RetryOf
	}
}

// knownLineage returns what n8n told the service before about an
// execution's place in a retry chain (id as the service keeps it): known is
// false when it knows nothing (the execution is unseen, or seen only in
// claims and payloads).
func (s *Store) knownLineage(ctx context.Context, id string) (bool, audit.N8NExecution, error) {
	var x struct {
		RetryOf    string `db:"retry_of"`
		Mode       string `db:"mode"`
		WorkflowID string `db:"workflow_id"`
	}
	err := s.get(ctx, s.db, &x, "read lineage", s.q.ExecutionReadKnownLineage, id)
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
	query := s.q.EventOtherHolder
	arg := map[string]any{"source": k.Source, "event_id": k.EventID, "statuses": statuses, "caller": k.ExecutionID}
	if len(k.Items) > 0 {
		arg["items"] = k.Items
		query = s.q.ItemOtherHolder
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
	err := s.get(ctx, s.db, &x, "read execution", s.q.ExecutionRead, id)
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
		err := s.get(ctx, s.db, &e, "read execution", s.q.ExecutionRead, a)
		if isNoRows(err) {
			e = audit.Execution{ID: a, Note: "not seen by the service"}
		} else if err != nil {
			return x, nil, nil, err
		}
		up = append(up, e)
	}
	var down []audit.Execution
	err = s.selectAll(ctx, s.db, &down, "read retries", s.q.ExecutionReadRetries, id)
	return x, up, down, err
}

// ExecutionEvents returns the events an execution touched.
func (s *Store) ExecutionEvents(ctx context.Context, id string) ([]audit.TouchedEvent, error) {
	var out []audit.TouchedEvent
	err := s.selectAll(ctx, s.db, &out, "read touched events", s.q.EventExecutionReadTouched, id)
	return out, err
}
