package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// selectEvent reads events; its one parameter is the review cutoff.
const selectEvent = `SELECT source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
	deliveries, item_count, fingerprint, crm_ref, review_reason, stale_alerted_at,
	CASE WHEN status = 'processing' AND (review_reason <> '' OR updated_at < ?) THEN 1 ELSE 0 END AS needs_review
	FROM webhook_events`

// Event returns one event with its items, the newest page of its history,
// and its executions, errors and alerts.
func (s *Store) Event(ctx context.Context, source, eventID string) (audit.EventDetail, error) {
	return s.EventPage(ctx, source, eventID, audit.HistoryPage{})
}

// EventPage is Event with the page of history that p selects.
func (s *Store) EventPage(ctx context.Context, source, eventID string, p audit.HistoryPage) (audit.EventDetail, error) {
	var d audit.EventDetail
	if p.Limit <= 0 || p.Limit > 500 {
		p.Limit = 100
	}
	if p.Before <= 0 {
		p.Before = 1<<63 - 1
	}
	var tx any = s.db
	if s.d.name == "postgres" {
		// One snapshot for the event and its lines. (SQLite's transactions
		// here take the write lock; its reads beside the writer are
		// consistent enough for a page.)
		ptx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
		if err != nil {
			return d, dbError("begin", err)
		}
		defer ptx.Rollback()
		tx = ptx
	}
	err := s.get(ctx, tx, &d.Event, "read event", selectEvent+` WHERE source = ? AND event_id = ?`,
		s.d.t(s.reviewCutoff()), source, eventID)
	if isNoRows(err) {
		return d, audit.Errorf(audit.CodeNotFound, "no event %s/%s", source, eventID)
	}
	if err != nil {
		return d, err
	}
	if err := s.selectAll(ctx, tx, &d.Items, "read items", `SELECT item, status, holder_execution_id, crm_ref,
		review_reason, created_at, updated_at FROM event_items WHERE source = ? AND event_id = ? ORDER BY item`,
		source, eventID); err != nil {
		return d, err
	}
	if err := s.historyPage(ctx, tx, &d, p); err != nil {
		return d, err
	}
	if err := s.selectAll(ctx, tx, &d.Executions, "read executions", `SELECT x.execution_id, x.workflow_id,
		x.workflow_name, x.mode, x.retry_of, x.claimed_retry_of, x.root_execution_id, x.n8n_url, x.lineage_note,
		x.first_seen_at, x.last_seen_at, ee.role, ee.delivery, ee.acted, ee.delivery_id, ee.class,
		ee.first_seen_at AS touched_at
		FROM event_executions ee JOIN executions x ON x.execution_id = ee.execution_id
		WHERE ee.source = ? AND ee.event_id = ? ORDER BY ee.first_seen_at, x.execution_id LIMIT ?`,
		source, eventID, audit.MaxListed); err != nil {
		return d, err
	}
	if err := s.selectAll(ctx, tx, &d.Errors, "read errors", selectError+
		` WHERE source = ? AND event_id = ? ORDER BY id LIMIT ?`, source, eventID, audit.MaxListed); err != nil {
		return d, err
	}
	if err := s.selectAll(ctx, tx, &d.Alerts, "read alerts", selectOutbox+
		` WHERE thread_key = ? ORDER BY id LIMIT ?`, audit.EventThread(source, eventID), audit.MaxListed); err != nil {
		return d, err
	}
	d.ExecutionsTotal, d.ErrorsTotal, d.AlertsTotal = len(d.Executions), len(d.Errors), len(d.Alerts)
	for _, c := range []struct {
		n     *int
		query string
		arg   string
	}{
		{&d.ExecutionsTotal, `SELECT count(*) FROM event_executions WHERE source = ? AND event_id = ?`, eventID},
		{&d.ErrorsTotal, `SELECT count(*) FROM n8n_errors WHERE source = ? AND event_id = ?`, eventID},
	} {
		if *c.n == audit.MaxListed {
			if err := s.get(ctx, tx, c.n, "count", c.query, source, c.arg); err != nil {
				return d, err
			}
		}
	}
	if d.AlertsTotal == audit.MaxListed {
		if err := s.get(ctx, tx, &d.AlertsTotal, "count alerts", `SELECT count(*) FROM outbox WHERE thread_key = ?`,
			audit.EventThread(source, eventID)); err != nil {
			return d, err
		}
	}
	return d, nil
}

func (s *Store) reviewCutoff() time.Time { return s.now().Add(-s.reviewAfter) }

// ReviewAfter returns how long an entry may stay processing before review.
func (s *Store) ReviewAfter() time.Duration { return s.reviewAfter }

// far is later than any row's time: the first page's cursor.
var far = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Events lists events by last activity, newest first, with keyset
// pagination: the cursor is the last row's (last_seen_at, source,
// event_id), and the index on those columns finds the next page directly
// however deep it is.
func (s *Store) Events(ctx context.Context, f audit.EventFilter) (audit.EventPage, error) {
	if err := f.Validate(); err != nil {
		return audit.EventPage{}, err
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	curAt, curSource, curID := far, "", ""
	if f.Cursor != "" {
		var err error
		if curAt, curSource, curID, err = audit.DecodeCursor(f.Cursor); err != nil {
			return audit.EventPage{}, audit.FieldErrors{"cursor": "not a cursor this service returned"}.Err()
		}
	}
	olderThan := far
	if f.OlderThan > 0 {
		olderThan = s.now().Add(-f.OlderThan)
	}
	review := 0
	if f.NeedsReview {
		review = 1
	}
	var events []audit.Event
	err := s.selectAll(ctx, s.db, &events, "list events", selectEvent+`
		WHERE (last_seen_at, source, event_id) < (?, ?, ?)
		AND (? = '' OR source = ?) AND (? = '' OR status = ?)
		AND (? = '' OR substr(event_id, 1, ?) = ?)
		AND (? = '' OR EXISTS (SELECT 1 FROM event_executions x
			WHERE x.source = webhook_events.source AND x.event_id = webhook_events.event_id
			AND CASE WHEN ? = 'default' THEN x.execution_id NOT LIKE '%@%' ELSE x.execution_id LIKE ? END))
		AND updated_at < ?
		AND (? = 0 OR (status = 'processing' AND (review_reason <> '' OR updated_at < ?)))
		ORDER BY last_seen_at DESC, source DESC, event_id DESC LIMIT ?`,
		s.d.t(s.reviewCutoff()), s.d.t(curAt), curSource, curID,
		f.Source, f.Source, string(f.Status), string(f.Status),
		f.Prefix, len([]rune(f.Prefix)), f.Prefix,
		f.Instance, f.Instance, "%"+audit.InstanceSep+f.Instance,
		s.d.t(olderThan), review, s.d.t(s.reviewCutoff()), f.Limit+1)
	if err != nil {
		return audit.EventPage{}, err
	}
	page := audit.EventPage{Events: events}
	if len(events) > f.Limit {
		page.Events = events[:f.Limit]
		last := page.Events[f.Limit-1]
		page.Next = encodeCursor(last.LastSeenAt, last.Source, last.EventID)
	}
	return page, nil
}

// ReviewQueue returns the entries waiting for a person, oldest first.
func (s *Store) ReviewQueue(ctx context.Context, limit int) ([]audit.Event, error) {
	var events []audit.Event
	cutoff := s.d.t(s.reviewCutoff())
	err := s.selectAll(ctx, s.db, &events, "read review queue", `SELECT w.source, w.event_id, w.status,
		w.created_at, w.updated_at, w.last_seen_at, w.holder_execution_id, w.deliveries, w.item_count, w.fingerprint,
		w.crm_ref, w.review_reason, w.stale_alerted_at, 1 AS needs_review,
		COALESCE((SELECT h.message FROM event_history h WHERE h.source = w.source AND h.event_id = w.event_id
			AND h.kind IN ('error', 'outcome', 'stale', 'not_holder') ORDER BY h.id DESC LIMIT 1), '') AS last_news
		FROM webhook_events w
		WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < ?)
		ORDER BY w.updated_at, w.source, w.event_id LIMIT ?`, cutoff, limit)
	return events, err
}

// StatusCounts returns how many events are in each status.
func (s *Store) StatusCounts(ctx context.Context) (map[audit.Status]int, error) {
	var rows []struct {
		Status audit.Status `db:"status"`
		N      int          `db:"n"`
	}
	if err := s.selectAll(ctx, s.db, &rows, "count events",
		`SELECT status, count(*) AS n FROM webhook_events GROUP BY status`); err != nil {
		return nil, err
	}
	counts := map[audit.Status]int{}
	for _, r := range rows {
		counts[r.Status] = r.N
	}
	return counts, nil
}

func encodeCursor(at time.Time, source, eventID string) string {
	raw := at.UTC().Format(time.RFC3339Nano) + "\x00" + source + "\x00" + eventID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}
