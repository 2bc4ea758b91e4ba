package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// ResolveRequest is a person's decision about an entry whose outcome the
// workflow could not tell.
type ResolveRequest struct {
	Source  string
	EventID string
	Item    string
	To      Status // done (the order exists) or failed (it does not: a retry is safe)
	Actor   string
	Note    string
}

// Validate checks every field and names each bad one.
func (r ResolveRequest) Validate() error {
	f := FieldErrors{}
	f.source("source", r.Source)
	f.text("event_id", r.EventID, true, MaxEventIDLen)
	f.text("item", r.Item, false, MaxItemLen)
	if r.To != StatusDone && r.To != StatusFailed {
		f.Add("to", "must be done or failed")
	}
	f.text("actor", r.Actor, true, MaxNameLen)
	f.note("note", r.Note, true, MaxTextLen)
	return f.Err()
}

// Resolve moves a processing entry to done or failed for a person, with the
// same conditional update as an outcome report: of two people resolving at
// once, one wins and the other is told who did.
func (s *Store) Resolve(ctx context.Context, req ResolveRequest) (Status, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	var status Status
	var alerted bool
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := s.now()
		arg := map[string]any{"source": req.Source, "event_id": req.EventID, "item": req.Item,
			"now": s.d.t(now), "status": string(req.To), "crm_ref": ""}
		e, changed, err := s.finish(ctx, tx, OutcomeRequest{Source: req.Source, EventID: req.EventID,
			Item: req.Item, Outcome: Outcome(req.To)}, arg)
		if err == nil && !changed {
			err = &Error{Code: CodeConflict, Status: e.Status, Message: "the entry is already " + string(e.Status)}
		}
		if err != nil {
			return s.explainConflict(ctx, tx, req, err)
		}
		if req.Item != "" {
			if _, _, err := s.rollUp(ctx, tx, req.Source, req.EventID, "", now); err != nil {
				return err
			}
		}
		status = e.Status
		h := HistoryLine{Source: req.Source, EventID: req.EventID, Item: req.Item, Kind: KindResolution,
			Decision: string(req.To), Status: string(e.Status), Actor: req.Actor, Message: req.Note}
		if _, err := s.addHistory(ctx, tx, h, now); err != nil {
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

// explainConflict adds who moved the entry last to a conflict.
func (s *Store) explainConflict(ctx context.Context, tx *sqlx.Tx, req ResolveRequest, err error) error {
	e, ok := err.(*Error)
	if !ok || e.Code != CodeConflict {
		return err
	}
	var last struct {
		Kind        string    `db:"kind"`
		Actor       string    `db:"actor"`
		ExecutionID string    `db:"execution_id"`
		At          time.Time `db:"at"`
	}
	qerr := s.get(ctx, tx, &last, "read history", `SELECT kind, actor, execution_id, at FROM event_history
		WHERE source = ? AND event_id = ? AND item = ? AND kind IN ('resolution', 'outcome')
		ORDER BY id DESC LIMIT 1`, req.Source, req.EventID, req.Item)
	switch {
	case isNoRows(qerr):
	case qerr != nil:
		return qerr
	case last.Kind == KindResolution:
		e.Message = fmt.Sprintf("already %s: resolved by %s at %s", e.Status, last.Actor, last.At.UTC().Format(time.RFC3339))
	default:
		e.Message = fmt.Sprintf("already %s: reported by execution %s at %s", e.Status, last.ExecutionID,
			last.At.UTC().Format(time.RFC3339))
	}
	return e
}

// DetectStale alerts, once per processing period, about entries processing
// for longer than the review delay without an outcome. The conditional
// update makes it safe for several instances to run it at once.
func (s *Store) DetectStale(ctx context.Context) (int, error) {
	cutoff := s.d.t(s.reviewCutoff())
	var keys []EventKey
	if err := s.selectAll(ctx, s.db, &keys, "find stale entries", `SELECT source, event_id FROM webhook_events
		WHERE status = 'processing' AND updated_at < ? AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
		ORDER BY updated_at LIMIT 100`, cutoff); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		err := s.inTx(ctx, func(tx *sqlx.Tx) error {
			now := s.now()
			var e entryState
			ok, err := s.namedGet(ctx, tx, &e, "mark stale", `UPDATE webhook_events SET stale_alerted_at = :now
				WHERE source = :source AND event_id = :event_id AND status = 'processing' AND updated_at < :cutoff
				AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
				RETURNING status, holder_execution_id, item_count`,
				map[string]any{"now": s.d.t(now), "source": k.Source, "event_id": k.EventID, "cutoff": cutoff})
			if err != nil || !ok {
				return err
			}
			h := HistoryLine{Source: k.Source, EventID: k.EventID, Kind: KindStale, ExecutionID: e.Holder,
				Status: string(e.Status), Message: fmt.Sprintf("processing for over %s without an outcome", s.reviewAfter)}
			if _, err := s.addHistory(ctx, tx, h, now); err != nil {
				return err
			}
			n++
			return s.alertEvent(ctx, tx, AlertStale, h, now)
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
