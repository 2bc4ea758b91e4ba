package store

import (
	"context"
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

// entryQueries are the four statements that capture a ledger entry, for one
// table: the whole event (webhook_events) or one of its items.
type entryQueries struct {
	insert  string // a new key
	reclaim string // failed → processing
	hold    string // processing, held by the caller or by what it retries
	read    string // none of those: what is it?
}

func (q queries) eventEntry() entryQueries {
	return entryQueries{insert: q.EventInsert, reclaim: q.EventReclaim, hold: q.EventHold, read: q.EventTouch}
}

// The item statements run after the event's row has been locked (inserted or
// touched) in the same transaction, so a plain read is consistent.
func (q queries) itemEntry() entryQueries {
	return entryQueries{insert: q.ItemInsert, reclaim: q.ItemReclaim, hold: q.ItemHold, read: q.ItemRead}
}

// claimEntry captures one ledger entry with the first of its statements that
// returns a row. Between two statements another transaction may move the
// entry (PostgreSQL); the loop then tries again, and when the entry will not
// settle, the answer is the safe one: in progress, do nothing.
func (s *Store) claimEntry(ctx context.Context, tx *sqlx.Tx, q entryQueries, a entryArgs) (entryState, error) {
	steps := []struct {
		query    string
		decision audit.Decision
	}{{q.insert, audit.DecisionClaimed}, {q.reclaim, audit.DecisionReclaimed}, {q.hold, audit.DecisionHeld}}
	var e entryState
	for attempt := 0; attempt < 3; attempt++ {
		for _, step := range steps {
			ok, err := s.namedGet(ctx, tx, &e, "claim entry", step.query, a)
			if err != nil || ok {
				e.decision = step.decision
				return e, err
			}
		}
		ok, err := s.namedGet(ctx, tx, &e, "read entry", q.read, a)
		switch {
		case err != nil:
			return e, err
		case !ok:
			continue // deleted meanwhile: claim it anew
		case e.ItemCount > 0:
			return e, nil // an item event: the caller says what to do
		case e.Status == audit.StatusDone:
			e.decision = audit.DecisionDuplicate
			return e, nil
		case e.Status == audit.StatusFailed:
			continue // failed since our reclaim: try to capture it
		}
		e.decision = audit.DecisionInProgress
		return e, nil
	}
	e.decision = audit.DecisionInProgress
	return e, nil
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
