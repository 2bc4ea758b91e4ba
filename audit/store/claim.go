package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// Claim registers an execution's wish to act on an event and decides, in one
// transaction, whether it may. Every claim is decided in a batch
// (claimBatch), a lone one in a batch of one, by the same code. Each entry
// is captured by one atomic statement (an insert guarded by the unique key,
// or a conditional update from failed, or from processing when the caller
// or what it retries holds it); nothing is read first and then written.
func (s *Store) Claim(ctx context.Context, req audit.ClaimRequest) (audit.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return audit.ClaimResult{}, err
	}
	return s.claims.do(ctx, s.claimInput(ctx, req.Stored(s.redact)))
}

// roundClaim is a claim in a round of its batch (claimRound): the job, the
// execution as the service keeps it, and what the round found out.
type roundClaim struct {
	*claimJob
	id    string   // the execution as the service keeps it (31~2 for a reused id)
	chain []string // id, then the executions it retries, nearest first (n8n's lineage)
	reset string   // why the id names a new execution, when it does
	// recorded: its execution was recorded with its lineage
	// (recordExecution), not with the round's executions.
	recorded bool
	entry    batchEntry
	items    []audit.ItemClaim
}

func (c *roundClaim) key() audit.EventKey { return eventKey(c.req.req) }

// needsRecord reports a claim whose execution the round cannot record with
// the others: its lineage to record (confirmed, or a client's retry_of,
// which roots it under the execution it names), its items, or an identity
// that anything but its id decides (known is the execution kept under its
// id, if any: a reused id, another workflow, n8n's word to ask for).
func (s *Store) needsRecord(c *roundClaim, known *knownExecution, now time.Time) bool {
	r, lin := c.req.req, c.req.lin
	if c.req.lineageToRecord() {
		return true
	}
	if known == nil {
		return false
	}
	seen := audit.Sighting{Kind: audit.SeenClaim, WorkflowID: r.WorkflowID, StartedAt: lin.self.startedAt()}
	verdict, _ := audit.Judge(known.domain(), seen, now, s.maxRun)
	return known.ID != r.ExecutionID || verdict != audit.SameExecution || known.RetryOf != "" ||
		s.lookup != nil && !lin.self.tried && known.stale(now)
}

// recordLineage records the execution of a claim that needsRecord, with
// the ancestors n8n told of. It runs in a round of one, in the savepoint
// its batch gave the claim: a claim refused for its identity (c.err), or
// one whose identity n8n's API should confirm first (c.again: errAskN8N),
// is rolled back with everything it wrote. It reports whether the claim
// goes on.
func (s *Store) recordLineage(ctx context.Context, tx *sqlx.Tx, c *roundClaim, now time.Time) (bool, error) {
	r, lin := c.req.req, c.req.lin
	if err := s.recordHops(ctx, tx, lin, now); err != nil {
		return false, err
	}
	rec, err := s.recordExecution(ctx, tx, executionRecord{
		ID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
		RetryOf: lin.retryOf, ClaimedRetryOf: r.RetryOf, Mode: lin.mode, Note: lin.note,
		Seen:  audit.Sighting{Kind: audit.SeenClaim, WorkflowID: r.WorkflowID, StartedAt: lin.self.startedAt()},
		Asked: lin.self.tried,
	}, now)
	switch {
	case errors.Is(err, errAskN8N):
		c.again = true // its caller asks n8n, then it comes again
		return false, nil
	case refusal(err):
		c.err = err
		return false, nil
	case err != nil:
		return false, err
	case len(rec.chain) == 0:
		// Taking it for the known one would hand it that one's claim;
		// taking it for another would give one id two holders.
		c.err = &audit.Error{Code: audit.CodeConflict, Message: cmp.Or(rec.reset, conflictNote(r.ExecutionID, r.WorkflowID))}
		return false, nil
	}
	c.id, c.chain, c.reset, c.recorded = rec.id(), rec.chain, rec.reset, true
	return true, nil
}

// captureItems captures a claim's items, one by one, after locking (or
// making) the event's row, and rolls the event up from them: the event's
// decision is the strongest of its items'.
func (s *Store) captureItems(ctx context.Context, tx *sqlx.Tx, c *roundClaim, now time.Time) error {
	r := c.req.req
	a := entryArgs{Source: r.Source, EventID: r.EventID, Holder: c.id, Now: s.t(now), Chain: c.chain}
	e := &c.entry
	created, err := s.namedGet(ctx, tx, e, "claim event", s.q.EventInsertWithItems, a)
	if err != nil {
		return err
	}
	if created {
		e.Step = "insert"
	} else if ok, err := s.namedGet(ctx, tx, e, "claim event", s.q.EventLockWithItems, a); err != nil {
		return err
	} else if !ok || e.ItemCount == 0 {
		c.err = withoutItems(r)
		return nil
	}
	e.decision = audit.DecisionDuplicate
	for _, item := range r.Items {
		a.Item = item
		st, d, err := s.captureItem(ctx, tx, a)
		if err != nil {
			return err
		}
		c.items = append(c.items, audit.ItemClaim{
			Item: item, Process: d.Process(), Decision: d, Status: st.Status,
			HolderExecutionID: st.Holder, IdempotencyKey: audit.IdempotencyKey(r.Source, r.EventID, item),
		})
		if d.Rank() > e.decision.Rank() {
			e.decision = d
		}
	}
	holder := ""
	if e.decision.Process() {
		holder = c.id
	}
	e.Status, e.Holder, err = s.rollUp(ctx, tx, r.Source, r.EventID, holder, now)
	return err
}

func withItems(r audit.ClaimRequest) error {
	return &audit.Error{Code: audit.CodeConflict, Message: fmt.Sprintf(
		"event %s/%s was claimed with items: claim it with its items", r.Source, r.EventID)}
}

func withoutItems(r audit.ClaimRequest) error {
	return audit.Errorf(audit.CodeConflict, "event %s/%s was claimed without items: claim it without items",
		r.Source, r.EventID)
}

// claimHistory is a claim's history line.
func claimHistory(c *roundClaim, res audit.ClaimResult) audit.HistoryLine {
	r := c.req.req
	retryOf := "" // what n8n confirmed; a client's retry_of is in the note
	if len(c.chain) > 1 {
		retryOf = c.chain[1]
	}
	return audit.HistoryLine{
		Source: r.Source, EventID: r.EventID, Kind: audit.KindClaim,
		ExecutionID: c.id, RetryOf: retryOf, WorkflowID: r.WorkflowID,
		WorkflowName: r.WorkflowName, Node: r.Node,
		Decision: string(res.Decision), Delivery: string(res.Delivery), Class: string(res.Class),
		Status:  string(res.Status),
		Message: claimMessage(res, c.chain, res.LineageNote),
	}
}

// follow does what follows from a claim's history line h: the alert about
// a second fingerprint, the errors that waited for the claim, news in an
// alerted event's thread. It reports whether it wrote an alert.
func (s *Store) follow(ctx context.Context, tx *sqlx.Tx, c *roundClaim, res audit.ClaimResult, h audit.HistoryLine,
	now time.Time) (bool, error) {
	alerted := false
	if res.FingerprintMismatch {
		if err := s.fingerprintMismatch(ctx, tx, c, res, now); err != nil {
			return false, err
		}
		alerted = true
	}
	wrote, err := s.linkPendingErrors(ctx, tx, h.Source, h.EventID, c.chain, now)
	if err != nil {
		return false, err
	}
	alerted = alerted || wrote
	// A retry is news for the people watching the event; so is a
	// redelivery that captured it. A redelivery told to do nothing is not:
	// it stays in the history.
	if res.Delivery == audit.DeliveryManualRetry || (res.Delivery == audit.DeliveryRedelivery && res.Process) {
		sent, err := s.followUp(ctx, tx, h, now)
		if err != nil {
			return false, err
		}
		alerted = alerted || sent
	}
	return alerted, nil
}

func (s *Store) fingerprintMismatch(ctx context.Context, tx *sqlx.Tx, c *roundClaim, res audit.ClaimResult,
	now time.Time) error {
	r := c.req.req
	h := audit.HistoryLine{
		Source: r.Source, EventID: r.EventID, Kind: audit.KindFingerprint,
		ExecutionID: c.id, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
		Decision: string(res.Decision), Status: string(res.Status),
		Message: "this delivery's fingerprint " + r.Fingerprint +
			" differs from the first one: the same key may name two different events",
	}
	if _, err := s.addHistory(ctx, tx, h, now); err != nil {
		return err
	}
	return s.alertEvent(ctx, tx, audit.AlertFingerprint, h, now)
}

func claimMessage(res audit.ClaimResult, chain []string, note string) string {
	var b strings.Builder
	switch {
	case res.Delivery == audit.DeliveryManualRetry && res.Decision == audit.DecisionHeld:
		fmt.Fprintf(&b, "retry of %s: takes over the claim", strings.Join(chain[1:], " ← "))
	case res.Delivery == audit.DeliveryManualRetry:
		fmt.Fprintf(&b, "retry of %s", strings.Join(chain[1:], " ← "))
	}
	for _, it := range res.Items {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", it.Item, it.Decision)
	}
	if note != "" {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(note)
	}
	return b.String()
}

// inChain reports whether an execution is one a claim retries (not the
// claim's own).
func inChain(chain []string, id string) bool {
	return len(chain) > 1 && slices.Contains(chain[1:], id)
}
