package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// DefaultAlertRepeat is how long errors linked to no event keep going into
// the thread their group opened, when Options.AlertRepeat is unset.
const DefaultAlertRepeat = time.Hour

// groupReplyEvery spaces the counted replies in a group's thread (and the
// rewrites of its first message): a trigger failing every few seconds is
// told once a minute at most, with the count.
const groupReplyEvery = time.Minute

// alertGroup is the thread that errors of one (kind, workflow, node) go to
// during a repeat interval.
type alertGroup struct {
	Key        string       `db:"group_key"`
	Kind       string       `db:"kind"`
	WorkflowID string       `db:"workflow_id"`
	Node       string       `db:"node"`
	Thread     string       `db:"thread_key"`
	OpenedAt   time.Time    `db:"opened_at"`
	ClosesAt   time.Time    `db:"closes_at"`
	ReplyDue   sql.NullTime `db:"reply_due_at"`
}

// groupKey names the group of an error that links to no event, the way
// Alertmanager's group_by does: n8n's timestamp makes every payload of a
// failing trigger unique, its workflow, node and kind do not change.
func groupKey(kind, workflowID, node string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + workflowID + "\x00" + node))
	return hex.EncodeToString(h[:16])
}

// alertGroup writes an alert about what belongs to no event: the first of
// its group in a repeat interval opens a thread; a later one, when the
// notice counts (an error linked to nothing), is counted in it.
func (s *Store) alertGroup(ctx context.Context, tx *sqlx.Tx, n audit.GroupNotice, now time.Time) error {
	g, opened, err := s.joinGroup(ctx, tx, n.Kind, n.WorkflowID, n.Node, now)
	if err != nil {
		return err
	}
	a := n.Alert
	due := now.Add(time.Duration(n.Due) * time.Second)
	if a.Kind == audit.AlertUnlinkedError {
		a.Group, a.GroupFrom, a.GroupUntil = g.Key, g.OpenedAt, g.ClosesAt
	}
	switch {
	case opened:
		return s.enqueue(ctx, tx, g.Thread, audit.RowAlert, a, now, due)
	case n.Count:
		return s.repeatInGroup(ctx, tx, g, a, now, due)
	}
	return nil
}

// joinGroup returns the group of a kind, workflow and node at now, opening
// a new one (and reporting it) when none is open. Two notices of one group
// committing at once open it once: the second transaction waits for the
// first's row and finds it open.
func (s *Store) joinGroup(ctx context.Context, tx *sqlx.Tx, kind, workflowID, node string, now time.Time) (alertGroup, bool, error) {
	g := alertGroup{Key: groupKey(kind, workflowID, node), Kind: kind, WorkflowID: workflowID, Node: node,
		OpenedAt: now, ClosesAt: now.Add(s.alertRepeat)}
	g.Thread = "group:" + g.Key + ":" + strconv.FormatInt(now.UnixNano(), 10)
	var thread string
	opened, err := s.namedGet(ctx, tx, &thread, "open alert group", s.q.GroupJoin, map[string]any{"key": g.Key, "kind": g.Kind, "workflow_id": g.WorkflowID,
		"node": g.Node, "thread": g.Thread, "now": s.t(now), "closes": s.t(g.ClosesAt)})
	if err != nil || opened {
		return g, opened, err
	}
	err = s.one(ctx, tx, &g, "read alert group", s.q.GroupRead, map[string]any{"key": g.Key})
	return g, false, err
}

// repeatInGroup tells a group's open thread of one more error: a counted
// reply and a rewrite of the first message, both rendered when they are
// sent. While the first message or a reply waits, later errors need no row
// of their own: it will count them.
func (s *Store) repeatInGroup(ctx context.Context, tx *sqlx.Tx, g alertGroup, a audit.Alert, now, due time.Time) error {
	var waiting bool
	if err := s.one(ctx, tx, &waiting, "read outbox", s.q.OutboxPendingInThread, map[string]any{"thread": g.Thread}); err != nil {
		return err
	}
	if waiting {
		return nil
	}
	if g.ReplyDue.Valid && g.ReplyDue.Time.Add(groupReplyEvery).After(due) {
		due = g.ReplyDue.Time.Add(groupReplyEvery)
	}
	if _, err := s.namedExec(ctx, tx, "space group replies", s.q.GroupSpaceReplies, map[string]any{"due": s.t(due), "key": g.Key}); err != nil {
		return err
	}
	if err := s.enqueue(ctx, tx, g.Thread, audit.RowFollowup, a, now, due); err != nil {
		return err
	}
	return s.enqueue(ctx, tx, g.Thread, audit.RowRefresh, audit.Alert{Kind: a.Kind, Group: a.Group, ErrorID: a.ErrorID, At: now}, now, due)
}

// groupAlert brings a group's alert up to date: how many of its errors are
// still linked to no event, the first and the last, and the last one's
// details. A count of 0 means every error of the group was linked since.
func (s *Store) groupAlert(ctx context.Context, a audit.Alert) (audit.Alert, error) {
	var g alertGroup
	err := s.one(ctx, s.db, &g, "read alert group", s.q.GroupRead, map[string]any{"key": a.Group})
	if isNoRows(err) {
		return a, nil // the group was replaced: the alert stands as written
	}
	if err != nil {
		return a, err
	}
	if a.GroupFrom.IsZero() {
		a.GroupFrom, a.GroupUntil = g.OpenedAt, g.ClosesAt
	}
	var ends []struct { // the first and the last, one when they are one
		errorRow
		N int `db:"n"`
	}
	if err := s.namedSelect(ctx, s.db, &ends, "read group", s.q.GroupErrors, map[string]any{"kind": g.Kind,
		"workflow_id": g.WorkflowID, "node": g.Node, "from": s.t(a.GroupFrom), "until": s.t(a.GroupUntil)}); err != nil {
		return a, err
	}
	if a.Count = 0; len(ends) == 0 {
		return a, nil
	}
	first, last := ends[0], ends[len(ends)-1]
	a.Count, a.FirstAt, a.LastAt = last.N, first.ReceivedAt.Time, last.ReceivedAt.Time
	a.ErrorID, a.ExecutionID, a.RetryOf, a.Message = last.ID, last.ExecutionID, last.RetryOf, last.Message
	a.WorkflowName, a.N8NURL = last.WorkflowName, last.URL
	return a, nil
}
