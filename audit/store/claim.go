package store

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// Claim registers an execution's wish to act on an event and decides, in one
// transaction, whether it may: in a batch (claimBatch), of one when batching
// is off, so that every claim is decided by the same code. Each entry is captured by one atomic statement
// (an insert guarded by the unique key, or a conditional update from failed,
// or from processing when the caller already holds it); nothing is read
// first and then written.
func (s *Store) Claim(ctx context.Context, req audit.ClaimRequest) (audit.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return audit.ClaimResult{}, err
	}
	return s.claims.do(ctx, s.claimInput(ctx, req.Stored(s.redact)))
}

// claimer carries one claim's transaction through its steps.
type claimer struct {
	s       *Store
	tx      *sqlx.Tx
	req     audit.ClaimRequest
	now     time.Time
	lin     lineage
	chain   []string // the execution, then the executions it retries, nearest first
	created bool     // the event's row was inserted by this claim
	alerted bool
	note    string // what the history should say about the execution's identity
}

func (c *claimer) run(ctx context.Context) (audit.ClaimResult, error) {
	if err := c.s.recordHops(ctx, c.tx, c.lin, c.now); err != nil {
		return audit.ClaimResult{}, err
	}
	rec, err := c.s.recordExecution(ctx, c.tx, executionRecord{
		ID: c.req.ExecutionID, WorkflowID: c.req.WorkflowID, WorkflowName: c.req.WorkflowName,
		RetryOf: c.lin.retryOf, ClaimedRetryOf: c.req.RetryOf, Mode: c.lin.mode, Note: c.lin.note,
		Seen:  audit.Sighting{Kind: audit.SeenClaim, WorkflowID: c.req.WorkflowID, StartedAt: c.lin.self.startedAt()},
		Asked: c.lin.self.tried,
	}, c.now)
	if err != nil {
		return audit.ClaimResult{}, err
	}
	c.chain, c.note = rec.chain, joinNotes(rec.reset, c.lin.note)
	if len(c.chain) == 0 {
		// Taking it for the known one would hand it that one's claim;
		// taking it for another would give one id two holders.
		return audit.ClaimResult{}, &audit.Error{Code: audit.CodeConflict,
			Message: cmp.Or(rec.reset, conflictNote(c.req.ExecutionID, c.req.WorkflowID))}
	}
	c.req.ExecutionID = rec.id() // the execution as the service keeps it (31~2 for a reused id)
	res := audit.ClaimResult{
		IdempotencyKey: audit.IdempotencyKey(c.req.Source, c.req.EventID, ""),
		LineageNote:    c.note,
	}
	if len(c.req.Items) == 0 {
		err = c.claimEvent(ctx, &res)
	} else {
		err = c.claimItems(ctx, &res)
	}
	if err != nil {
		return audit.ClaimResult{}, err
	}
	res.Process = res.Decision.Process()
	if c.lin.note == "" {
		c.note = joinNotes(rec.reset, c.lin.noteFor(c.req.ExecutionID, res.Decision))
		res.LineageNote = c.note
	}
	if err := c.present(ctx, &res); err != nil {
		return audit.ClaimResult{}, err
	}
	if err := c.record(ctx, res); err != nil {
		return audit.ClaimResult{}, err
	}
	return res, nil
}

func (c *claimer) args(item string) entryArgs {
	return entryArgs{Source: c.req.Source, EventID: c.req.EventID, Item: item,
		Holder: c.req.ExecutionID, Now: c.s.t(c.now), Chain: c.chain}
}

func (c *claimer) claimEvent(ctx context.Context, res *audit.ClaimResult) error {
	e, err := c.s.claimEntry(ctx, c.tx, c.s.q.eventEntry(), c.args(""))
	if err != nil {
		return err
	}
	if e.ItemCount > 0 {
		return &audit.Error{Code: audit.CodeConflict, Status: e.Status, Message: fmt.Sprintf(
			"event %s/%s was claimed with items: claim it with its items", c.req.Source, c.req.EventID)}
	}
	c.created = e.decision == audit.DecisionClaimed
	res.Decision, res.Status, res.HolderExecutionID = e.decision, e.Status, e.Holder
	return nil
}

func (c *claimer) claimItems(ctx context.Context, res *audit.ClaimResult) error {
	a := c.args("")
	created, err := c.s.namedGet(ctx, c.tx, &c.created, "claim event", c.s.q.EventInsertWithItems, a)
	if err != nil {
		return err
	}
	if !created {
		var itemCount int
		if _, err := c.s.namedGet(ctx, c.tx, &itemCount, "claim event", c.s.q.EventLockWithItems, a); err != nil {
			return err
		}
		if itemCount == 0 {
			return audit.Errorf(audit.CodeConflict, "event %s/%s was claimed without items: claim it without items",
				c.req.Source, c.req.EventID)
		}
	}
	res.Decision = audit.DecisionDuplicate
	for _, item := range c.req.Items {
		e, err := c.s.claimEntry(ctx, c.tx, c.s.q.itemEntry(), c.args(item))
		if err != nil {
			return err
		}
		res.Items = append(res.Items, audit.ItemClaim{
			Item: item, Process: e.decision.Process(), Decision: e.decision, Status: e.Status,
			HolderExecutionID: e.Holder, IdempotencyKey: audit.IdempotencyKey(c.req.Source, c.req.EventID, item),
		})
		if e.decision.Rank() > res.Decision.Rank() {
			res.Decision = e.decision
		}
	}
	holder := ""
	if res.Decision.Process() {
		holder = c.req.ExecutionID
	}
	status, holder, err := c.s.rollUp(ctx, c.tx, c.req.Source, c.req.EventID, holder, c.now)
	if err != nil {
		return err
	}
	res.Status, res.HolderExecutionID = status, holder
	return nil
}

// present records that the execution presented the key and works out the
// kind of delivery: an execution that presented it before is the same
// execution, whatever it says now.
func (c *claimer) present(ctx context.Context, res *audit.ClaimResult) error {
	res.Delivery = audit.DeliveryRedelivery
	switch {
	case c.created:
		res.Delivery = audit.DeliveryFirst
	case len(c.chain) > 1:
		res.Delivery = audit.DeliveryManualRetry
	}
	if !c.created {
		var prev previousDelivery
		if err := c.s.get(ctx, c.tx, &prev, "read deliveries", c.s.q.EventReadPresented,
			c.req.Source, c.req.EventID); err != nil {
			return err
		}
		res.Class = classify(res.Decision, len(c.chain) > 1, prev, c.req.DeliveryID, c.req.WorkflowID,
			c.req.Fingerprint, c.now)
	}
	a := presentArgs{Source: c.req.Source, EventID: c.req.EventID, ExecutionID: c.req.ExecutionID,
		Delivery: string(res.Delivery), Now: c.s.t(c.now), Fingerprint: c.req.Fingerprint,
		Acted: res.Process, DeliveryID: c.req.DeliveryID, WorkflowID: c.req.WorkflowID, Class: string(res.Class)}
	var id string
	isNew, err := c.s.namedGet(ctx, c.tx, &id, "record delivery", c.s.q.EventExecutionPresent, a)
	if err != nil {
		return err
	}
	if isNew {
		a.New = 1
	} else {
		res.Delivery, res.Class = audit.DeliverySameExecution, ""
	}
	if !isNew && res.Process {
		if _, err := c.s.namedExec(ctx, c.tx, "record delivery", c.s.q.EventExecutionMarkActed, a); err != nil {
			return err
		}
	}
	var counted struct {
		Deliveries  int    `db:"deliveries"`
		Fingerprint string `db:"fingerprint"`
	}
	if _, err := c.s.namedGet(ctx, c.tx, &counted, "count deliveries", c.s.q.EventCountDelivery, a); err != nil {
		return err
	}
	res.Deliveries = counted.Deliveries
	res.FingerprintMismatch = c.req.Fingerprint != "" && counted.Fingerprint != c.req.Fingerprint
	return nil
}

// record writes the claim's history line and what follows from it.
func (c *claimer) record(ctx context.Context, res audit.ClaimResult) error {
	retryOf := "" // what n8n confirmed; a client's retry_of is in the note
	if len(c.chain) > 1 {
		retryOf = c.chain[1]
	}
	h := audit.HistoryLine{
		Source: c.req.Source, EventID: c.req.EventID, Kind: audit.KindClaim,
		ExecutionID: c.req.ExecutionID, RetryOf: retryOf, WorkflowID: c.req.WorkflowID,
		WorkflowName: c.req.WorkflowName, Node: c.req.Node,
		Decision: string(res.Decision), Delivery: string(res.Delivery), Class: string(res.Class),
		Status:  string(res.Status),
		Message: claimMessage(res, c.chain, c.note),
	}
	if _, err := c.s.addHistory(ctx, c.tx, h, c.now); err != nil {
		return err
	}
	if err := c.s.count(ctx, c.tx, c.now, c.req.Source, c.req.WorkflowID, claimMetrics(res)...); err != nil {
		return err
	}
	return c.follow(ctx, res, h)
}

// follow does what follows from a claim's history line h: the alert about
// a second fingerprint, the errors that waited for the claim, news in an
// alerted event's thread.
func (c *claimer) follow(ctx context.Context, res audit.ClaimResult, h audit.HistoryLine) error {
	if res.FingerprintMismatch {
		if err := c.fingerprintMismatch(ctx, res); err != nil {
			return err
		}
	}
	linked, err := c.s.linkPendingErrors(ctx, c.tx, c.req.Source, c.req.EventID, c.chain, c.now)
	if err != nil {
		return err
	}
	c.alerted = c.alerted || linked
	// A retry is news for the people watching the event; so is a
	// redelivery that captured it. A redelivery told to do nothing is not:
	// it stays in the history.
	if res.Delivery == audit.DeliveryManualRetry || (res.Delivery == audit.DeliveryRedelivery && res.Process) {
		sent, err := c.s.followUp(ctx, c.tx, h, c.now)
		if err != nil {
			return err
		}
		c.alerted = c.alerted || sent
	}
	return nil
}

func (c *claimer) fingerprintMismatch(ctx context.Context, res audit.ClaimResult) error {
	h := audit.HistoryLine{
		Source: c.req.Source, EventID: c.req.EventID, Kind: audit.KindFingerprint,
		ExecutionID: c.req.ExecutionID, WorkflowID: c.req.WorkflowID, WorkflowName: c.req.WorkflowName,
		Decision: string(res.Decision), Status: string(res.Status),
		Message: "this delivery's fingerprint " + c.req.Fingerprint +
			" differs from the first one: the same key may name two different events",
	}
	if _, err := c.s.addHistory(ctx, c.tx, h, c.now); err != nil {
		return err
	}
	c.alerted = true
	return c.s.alertEvent(ctx, c.tx, audit.AlertFingerprint, h, c.now)
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

// presentArgs name the parameters of the delivery statements.
type presentArgs struct {
	Source      string `db:"source"`
	EventID     string `db:"event_id"`
	ExecutionID string `db:"execution_id"`
	Delivery    string `db:"delivery"`
	Now         any    `db:"now"`
	Fingerprint string `db:"fingerprint"`
	New         int    `db:"new"`
	Acted       bool   `db:"acted"`
	DeliveryID  string `db:"delivery_id"`
	WorkflowID  string `db:"workflow_id"`
	Class       string `db:"class"`
}
