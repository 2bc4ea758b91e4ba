package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// resolveQueries move a processing entry for a person, fenced by the holder
// the person saw, and only when the entry waits for review or the person
// confirmed that nothing runs.
func (q queries) resolveQueries() struct{ event, item finishQueries } {
	return struct{ event, item finishQueries }{
		event: finishQueries{finish: q.EventResolve, read: q.EventReadFinished},
		item:  finishQueries{finish: q.ItemResolve, read: q.ItemReadFinished},
	}
}

// Resolve moves a processing entry to done or failed for a person, with a
// conditional update fenced like an outcome's: of two people resolving at
// once one wins and the other is told who did, and an entry that another
// execution took over since the page was loaded is not moved.
func (s *Store) Resolve(ctx context.Context, req audit.ResolveRequest) (audit.Status, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	var status audit.Status
	var alerted bool
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := s.now()
		q := s.q.resolveQueries().event
		if req.Item != "" {
			q = s.q.resolveQueries().item
			if _, err := s.namedExec(ctx, tx, "lock event", s.q.EventLock, map[string]any{
				"source": req.Source, "event_id": req.EventID, "now": s.t(now)}); err != nil {
				return err
			}
		}
		arg := map[string]any{"source": req.Source, "event_id": req.EventID, "item": req.Item,
			"now": s.t(now), "status": string(req.To), "crm_ref": req.CRMRef, "holder": req.Holder,
			"confirmed": req.Confirmed, "cutoff": s.t(s.reviewCutoff())}
		var e finishState
		ok, err := s.namedGet(ctx, tx, &e, "resolve", q.finish, arg)
		if err != nil {
			return err
		}
		if !ok {
			return s.explainRefusal(ctx, tx, req, q, arg)
		}
		if req.Item != "" {
			if _, _, err := s.rollUp(ctx, tx, req.Source, req.EventID, "", now); err != nil {
				return err
			}
		}
		status = e.Status
		h := audit.HistoryLine{Source: req.Source, EventID: req.EventID, Item: req.Item, Kind: audit.KindResolution,
			ExecutionID: e.Holder, Decision: string(req.To), Status: string(e.Status), Actor: req.Actor,
			Message: req.Note, CRMRef: req.CRMRef}
		if _, err := s.addHistory(ctx, tx, h, now); err != nil {
			return err
		}
		if err := s.recordResolution(ctx, tx, req.Source, req.EventID, req.Item, now); err != nil {
			return err
		}
		if err := s.countFor(ctx, tx, now, req.Source, e.Holder, audit.MetricResolved); err != nil {
			return err
		}
		alerted, err = s.followUp(ctx, tx, h, now)
		return err
	})
	if alerted {
		s.nudge()
	}
	return status, err
}

// explainRefusal says why a resolution moved nothing: no such entry, it is
// no longer processing (and who moved it), another execution holds it now,
// or it needs the confirmation that nothing runs.
func (s *Store) explainRefusal(ctx context.Context, tx *sqlx.Tx, req audit.ResolveRequest, q finishQueries, arg map[string]any) error {
	var e finishState
	ok, err := s.namedGet(ctx, tx, &e, "read entry", q.read, arg)
	switch {
	case err != nil:
		return err
	case !ok && req.Item != "":
		return audit.Errorf(audit.CodeNotFound, "no item %q in event %s/%s", req.Item, req.Source, req.EventID)
	case !ok:
		return audit.Errorf(audit.CodeNotFound, "no event %s/%s", req.Source, req.EventID)
	case req.Item == "" && e.ItemCount > 0:
		return audit.FieldErrors{"item": "required: this event was claimed with items"}.Err()
	case e.Status != audit.StatusProcessing:
		return s.explainConflict(ctx, tx, req, &audit.Error{Code: audit.CodeConflict, Status: e.Status, Holder: e.Holder,
			Message: "the entry is already " + string(e.Status)})
	case e.Holder != req.Holder:
		return &audit.Error{Code: audit.CodeConflict, Status: e.Status, Holder: e.Holder, Message: fmt.Sprintf(
			"execution %s holds the entry now (you saw %s): reload the page and look again", holderName(e.Holder),
			holderName(req.Holder))}
	}
	return audit.FieldErrors{"confirm": "the entry does not wait for review and may still be running: " +
		"confirm that no execution is still running the action"}.Err()
}

// explainConflict adds who moved the entry last to a conflict.
func (s *Store) explainConflict(ctx context.Context, tx *sqlx.Tx, req audit.ResolveRequest, err error) error {
	e, ok := err.(*audit.Error)
	if !ok || e.Code != audit.CodeConflict {
		return err
	}
	last, qerr := s.lastSettlement(ctx, tx, req.Source, req.EventID, req.Item)
	switch {
	case isNoRows(qerr):
	case qerr != nil:
		return qerr
	case last.Kind == audit.KindResolution:
		e.Message = fmt.Sprintf("already %s: resolved by %s at %s", e.Status, last.Actor, last.At.UTC().Format(time.RFC3339))
	default:
		e.Message = fmt.Sprintf("already %s: reported by execution %s at %s", e.Status, last.ExecutionID,
			last.At.UTC().Format(time.RFC3339))
	}
	return e
}

// settlement is the last line that settled an entry: an outcome or a
// person's resolution.
type settlement struct {
	Kind        string    `db:"kind"`
	Actor       string    `db:"actor"`
	ExecutionID string    `db:"execution_id"`
	At          time.Time `db:"at"`
}

// lastSettlement reads the line that settled an entry (or one of its
// items) last.
func (s *Store) lastSettlement(ctx context.Context, tx *sqlx.Tx, source, eventID, item string) (settlement, error) {
	var last settlement
	err := s.get(ctx, tx, &last, "read history", s.q.HistoryReadSettlements, source, eventID, item)
	return last, err
}

// DetectStale alerts, once per processing period, about entries processing
// for longer than the review delay without an outcome. The conditional
// update makes it safe for several instances to run it at once.
func (s *Store) DetectStale(ctx context.Context) (int, error) {
	cutoff := s.t(s.reviewCutoff())
	var keys []struct {
		audit.EventKey
		Holder string `db:"holder_execution_id"`
	}
	// An entry already in review has had its alert (an error, an unknown
	// outcome, a refused done or unknown): saying "too long" about it again
	// is noise.
	if err := s.selectAll(ctx, s.db, &keys, "find stale entries", s.q.EventFindStale, cutoff); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		err := s.inTx(ctx, func(tx *sqlx.Tx) error {
			now := s.now()
			var e entryState
			ok, err := s.namedGet(ctx, tx, &e, "mark stale", s.q.EventDetectStale,
				map[string]any{"now": s.t(now), "source": k.Source, "event_id": k.EventID, "cutoff": cutoff,
					"holder": k.Holder})
			if err != nil || !ok {
				return err
			}
			h := audit.HistoryLine{Source: k.Source, EventID: k.EventID, Kind: audit.KindStale, ExecutionID: e.Holder,
				Status: string(e.Status), Message: fmt.Sprintf("processing for over %s without an outcome", s.reviewAfter)}
			if _, err := s.addHistory(ctx, tx, h, now); err != nil {
				return err
			}
			n++
			return s.alertEvent(ctx, tx, audit.AlertStale, h, now)
		})
		if err != nil {
			return n, err
		}
	}
	if n > 0 {
		s.nudge()
	}
	return n, nil
}
