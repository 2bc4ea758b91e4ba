package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// finished reports a status n8n gives an execution that will not run again
// under its id.
func finished(status string) bool {
	switch status {
	case "success", "error", "crashed", "canceled":
		return true
	}
	return false
}

// knownExecution is the row of the execution the service keeps under an
// id n8n gave, as a statement returns it or as PostgreSQL's json_agg writes
// it (EventBatchLock).
type knownExecution struct {
	ID          string    `db:"execution_id" json:"execution_id"`
	N8NID       string    `db:"n8n_id" json:"n8n_id"`
	RetryOf     string    `db:"retry_of" json:"retry_of"`
	Mode        string    `db:"mode" json:"mode"`
	Status      string    `db:"n8n_status" json:"n8n_status"`
	Incarnation int       `db:"incarnation" json:"incarnation"`
	WorkflowID  string    `db:"workflow_id" json:"workflow_id"`
	FirstSeen   time.Time `db:"first_seen_at" json:"first_seen_at"`
	LastSeen    time.Time `db:"last_seen_at" json:"last_seen_at"`
	StartedAt   nullTime  `db:"started_at" json:"started_at"`
	EndedAt     nullTime  `db:"ended_at" json:"ended_at"`
	CheckedAt   nullTime  `db:"checked_at" json:"checked_at"`
}

// nullTime is a time that may be NULL, read from a row or from JSON.
type nullTime struct{ sql.NullTime }

// UnmarshalJSON reads null, or a time as time.Time does.
func (t *nullTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = nullTime{}
		return nil
	}
	t.Valid = true
	return t.Time.UnmarshalJSON(b)
}

func (k knownExecution) domain() audit.KnownExecution {
	return audit.KnownExecution{ID: k.ID, WorkflowID: k.WorkflowID, FirstSeen: k.FirstSeen, LastSeen: k.LastSeen,
		StartedAt: k.StartedAt.Time, Ended: k.EndedAt.Valid, Waiting: k.Status == "waiting"}
}

// stale reports whether n8n last vouched for the execution (or the service
// first saw it) longer ago than identityRecheck.
func (k knownExecution) stale(now time.Time) bool {
	at := k.FirstSeen
	if k.CheckedAt.Valid && k.CheckedAt.Time.After(at) {
		at = k.CheckedAt.Time
	}
	return now.Sub(at) > identityRecheck
}

// identify returns the id under which the service keeps the execution a
// report names, and its count; "" for one refused as not the known one.
// A new execution reusing the id supersedes the known one; reset says why.
func (s *Store) identify(ctx context.Context, tx *sqlx.Tx, e executionRecord, now time.Time) (string, int, string, error) {
	var k knownExecution
	ok, err := s.namedGet(ctx, tx, &k, "read execution", s.q.ExecutionReadCurrent, map[string]any{"raw_id": e.ID})
	if err != nil || !ok {
		return e.ID, 1, "", err
	}
	asks := e.Seen.Kind == audit.SeenClaim || e.Seen.Kind == audit.SeenOutcome || e.Seen.Kind == audit.SeenError
	if s.lookup != nil && asks && !e.Asked && e.Seen.StartedAt.IsZero() && k.stale(now) {
		return "", 0, "", errAskN8N
	}
	verdict, why := audit.Judge(k.domain(), e.Seen, now, s.maxRun)
	switch verdict {
	case audit.SameExecution:
		return k.ID, k.Incarnation, "", nil
	case audit.OtherExecution:
		return "", 0, why, nil
	}
	if _, err := s.namedExec(ctx, tx, "supersede execution", s.q.ExecutionSupersede,
		map[string]any{"id": k.ID, "now": s.t(now)}); err != nil {
		return "", 0, "", err
	}
	next := audit.IncarnationID(e.ID, k.Incarnation+1)
	note := fmt.Sprintf("n8n's execution id %s names a new execution (kept as %s), not the one the service knew (now %s): %s",
		e.ID, next, k.ID, why)
	if err := s.alertIDReset(ctx, tx, e.ID, k.ID, next, why, now); err != nil {
		return "", 0, "", err
	}
	s.log.Warn("n8n's execution ids started again: a restore or a new database?", "n8n_id", e.ID,
		"known_as", k.ID, "new", next, "why", why)
	return next, k.Incarnation + 1, note, nil
}

// currentID returns the id under which the service keeps the execution n8n
// now gives the id qid: the last one seen with it.
func (s *Store) currentID(ctx context.Context, q any, qid string) (string, error) {
	var k knownExecution
	ok, err := s.namedGet(ctx, q, &k, "read execution", s.q.ExecutionReadCurrent, map[string]any{"raw_id": qid})
	if err != nil || !ok {
		return qid, err
	}
	return k.ID, nil
}

// alertIDReset tells people, once per n8n instance and repeat interval,
// that n8n handed out an execution id again: it was restored from a
// backup, moved to a new database, or a second n8n shares the ids.
func (s *Store) alertIDReset(ctx context.Context, tx *sqlx.Tx, n8nID, known, next, why string, now time.Time) error {
	instance := audit.DefaultInstance
	if _, in, ok := strings.Cut(n8nID, audit.InstanceSep); ok {
		instance = in
	}
	g, opened, err := s.joinGroup(ctx, tx, audit.N8NErrorReport{Kind: audit.AlertIDReset, WorkflowID: instance}, now)
	if err != nil || !opened {
		return err
	}
	a := audit.Alert{Kind: audit.AlertIDReset, ExecutionID: next, At: now, Message: fmt.Sprintf(
		"n8n (instance %s) gave execution id %s to a new execution; the service knew another one under it, now %s: %s. "+
			"Was n8n restored from a backup, or moved to a new database? Lineage and holds recorded for the old "+
			"executions do not apply to the new ones; redeliveries of events the old ones claimed are told to wait.",
		instance, audit.N8NID(n8nID), known, why)}
	return s.enqueue(ctx, tx, g.Thread, audit.RowAlert, a, now, now)
}
