package store

import (
	"context"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// entryArgs names the parameters of the ledger statements.
type entryArgs struct {
	Source  string   `db:"source"`
	EventID string   `db:"event_id"`
	Item    string   `db:"item"`
	Holder  string   `db:"holder"`
	Now     any      `db:"now"`
	Chain   []string `db:"chain"`
}

// entryState is a ledger entry as a statement returned it.
type entryState struct {
	Status    audit.Status `db:"status" json:"status"`
	Holder    string       `db:"holder_execution_id" json:"holder_execution_id"`
	ItemCount int          `db:"item_count" json:"item_count"`
	decision  audit.Decision
}

// A claim captures its entry (an event's, or an item's) by steps, each one
// conditional statement: insert a new key, reclaim a failed entry, hold
// one in progress for the claiming execution when what it retries holds it,
// or touch it (read it, keeping it as it is). The step comes from the entry
// as last seen (stepFor); the statement's answer either decides the claim
// (decided) or, when the entry moved since it was seen (another session,
// on PostgreSQL), says what to try next. A batch takes its claims' steps
// together (claimRound); an item's go one at a time (captureItem).
const (
	stepInsert  = "insert"
	stepReclaim = "reclaim"
	stepHold    = "hold"
	stepTouch   = "touch"
)

// captureAttempts bounds the steps of a claim whose entry will not settle:
// it is then in progress, the safe answer.
const captureAttempts = 3

// stepFor is the step for an entry as last seen (exists: there was one).
func stepFor(e entryState, exists bool, chain []string) string {
	switch {
	case !exists:
		return stepInsert
	case e.Status == audit.StatusFailed:
		return stepReclaim
	case e.Status == audit.StatusProcessing && e.Holder != chain[0] && slices.Contains(chain, e.Holder):
		return stepHold
	}
	return stepTouch
}

// decided is the decision for a claim whose step returned its entry e; ""
// when the entry calls for another step (it failed, or what the claim
// retries holds it, since it was seen).
func decided(step string, e entryState, chain []string) audit.Decision {
	switch step {
	case stepInsert:
		return audit.DecisionClaimed
	case stepReclaim:
		return audit.DecisionReclaimed
	case stepHold:
		return audit.DecisionHeld
	}
	switch {
	case e.Status == audit.StatusFailed:
		return ""
	case e.Status == audit.StatusProcessing && e.Holder == chain[0]:
		return audit.DecisionHeld
	case e.Status == audit.StatusProcessing && slices.Contains(chain, e.Holder):
		return ""
	case e.Status == audit.StatusDone:
		return audit.DecisionDuplicate
	}
	return audit.DecisionInProgress
}

// afterMiss is the step after one that returned no entry: the key exists
// when an insert, a reclaim or a hold found it otherwise; a touch that
// found none finds it deleted meanwhile.
func afterMiss(step string) string {
	if step == stepTouch {
		return stepInsert
	}
	return stepTouch
}

// captureItem captures one item of a claim (a.Item) by its steps, after
// the claim locked the event's row: the items' statements then run alone.
func (s *Store) captureItem(ctx context.Context, tx *sqlx.Tx, a entryArgs) (entryState, audit.Decision, error) {
	q := map[string]string{stepInsert: s.q.ItemInsert, stepReclaim: s.q.ItemReclaim, stepHold: s.q.ItemHold,
		stepTouch: s.q.ItemRead}
	step := stepInsert
	var e entryState
	for attempt := 0; attempt < captureAttempts; attempt++ {
		ok, err := s.namedGet(ctx, tx, &e, "claim item", q[step], a)
		switch {
		case err != nil:
			return e, "", err
		case !ok:
			step = afterMiss(step)
			continue
		}
		if d := decided(step, e, a.Chain); d != "" {
			return e, d, nil
		}
		step = stepFor(e, true, a.Chain)
	}
	return e, audit.DecisionInProgress, nil
}

// rollUp sets an item event's status from its items: processing while any
// item is, else failed if any item failed, else done. Every statement that
// changes items has locked the event's row first, so the items read here
// are settled. holder, when set, becomes the event's holder.
func (s *Store) rollUp(ctx context.Context, tx *sqlx.Tx, source, eventID, holder string, now time.Time) (audit.Status, string, error) {
	var counts []struct {
		Status audit.Status `db:"status"`
		N      int          `db:"n"`
	}
	err := s.selectAll(ctx, tx, &counts, "count items",
		s.q.ItemCount,
		source, eventID)
	if err != nil {
		return "", "", err
	}
	status, total := audit.StatusDone, 0
	for _, c := range counts {
		total += c.N
		switch {
		case c.Status == audit.StatusProcessing:
			status = audit.StatusProcessing
		case c.Status == audit.StatusFailed && status != audit.StatusProcessing:
			status = audit.StatusFailed
		}
	}
	var e entryState
	_, err = s.namedGet(ctx, tx, &e, "roll up items", s.q.EventRollUp, map[string]any{
		"source": source, "event_id": eventID, "status": status, "count": total,
		"holder": holder, "now": s.t(now),
	})
	return e.Status, e.Holder, err
}

// namedGet runs a query with named parameters (and slices expanded for IN)
// and scans its one row into dest. It reports whether there was a row.
func (s *Store) namedGet(ctx context.Context, q any, dest any, op, query string, arg any) (bool, error) {
	query, args, err := bindNamed(query, arg)
	if err != nil {
		return false, &audit.Error{Code: audit.CodeInternal, Message: op + ": bind", Err: err}
	}
	err = s.get(ctx, q, dest, op, query, args...)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// namedExec runs a statement with named parameters and returns the number of
// rows it changed.
func (s *Store) namedExec(ctx context.Context, q any, op, query string, arg any) (int64, error) {
	query, args, err := bindNamed(query, arg)
	if err != nil {
		return 0, &audit.Error{Code: audit.CodeInternal, Message: op + ": bind", Err: err}
	}
	return s.exec(ctx, q, op, query, args...)
}

func bindNamed(query string, arg any) (string, []any, error) {
	query, args, err := sqlx.Named(query, arg)
	if err != nil {
		return "", nil, err
	}
	return sqlx.In(query, args...)
}
