package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"slices"
	"time"

	"github.com/retryaudit/retryaudit/audit"
)

// Event returns one event with its items, the newest page of its history,
// and its executions, errors and alerts.
func (s *Store) Event(ctx context.Context, source, eventID string) (audit.EventDetail, error) {
	return s.EventPage(ctx, source, eventID, audit.HistoryPage{})
}

// eventArgs are the parameters of an event's reads.
type eventArgs struct {
	Source  string `db:"source"`
	EventID string `db:"event_id"`
	Cutoff  any    `db:"cutoff"` // processing since before it: in review
	Thread  string `db:"thread"`
	Before  int64  `db:"before"` // a page of history: the lines before this id
	Limit   int    `db:"limit"`
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
	if s.drv.Snapshot() {
		// One snapshot for the event and its lines (see driver.Snapshot).
		ptx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
		if err != nil {
			return d, s.dbError("begin", err)
		}
		defer ptx.Rollback()
		tx = ptx
	}
	arg := eventArgs{Source: source, EventID: eventID, Cutoff: s.t(s.reviewCutoff()),
		Thread: audit.EventThread(source, eventID), Limit: audit.MaxListed}
	var ev eventRead
	err := s.one(ctx, tx, &ev, "read event", s.q.EventRead, arg)
	if isNoRows(err) {
		return d, audit.Errorf(audit.CodeNotFound, "no event %s/%s", source, eventID)
	}
	if err != nil {
		return d, err
	}
	d.Event = ev.event()
	entry := func(r itemRow) audit.Entry { return *r.entry() }
	if d.Items, err = selectAs(ctx, s, tx, "read items", s.q.ItemList, arg, entry); err != nil {
		return d, err
	}
	if d.Executions, err = selectAs(ctx, s, tx, "read executions", s.q.EventExecutionList, arg, executionRead.execution); err != nil {
		return d, err
	}
	if d.Errors, err = selectAs(ctx, s, tx, "read errors", s.q.ErrorListOfEvent, arg, errorRow.record); err != nil {
		return d, err
	}
	if d.Alerts, err = selectAs(ctx, s, tx, "read alerts", s.q.OutboxReadAlerts, arg, outboxRow.message); err != nil {
		return d, err
	}
	if err := s.historyPage(ctx, tx, &d, p); err != nil {
		return d, err
	}
	d.ExecutionsTotal, d.ErrorsTotal, d.AlertsTotal = len(d.Executions), len(d.Errors), len(d.Alerts)
	for _, c := range []struct {
		n         *int
		op, query string
	}{{&d.ExecutionsTotal, "count", s.q.EventExecutionCount}, {&d.ErrorsTotal, "count", s.q.ErrorCountOfEvent},
		{&d.AlertsTotal, "count alerts", s.q.OutboxCountThreadMessages}} {
		if *c.n == audit.MaxListed {
			if err := s.one(ctx, tx, c.n, c.op, c.query, arg); err != nil {
				return d, err
			}
		}
	}
	return d, nil
}

func (s *Store) reviewCutoff() time.Time { return s.now().Add(-s.reviewAfter) }

// ReviewAfter returns how long an entry may stay processing before review.
func (s *Store) ReviewAfter() time.Duration { return s.reviewAfter }

// far is later than any row's time: the first page's cursor.
var far = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// listArgs are EventList's parameters: the cursor (at, after_source,
// after_id) and the filters, an empty one or 0 none.
type listArgs struct {
	Cutoff       any    `db:"cutoff"`
	At           any    `db:"at"`
	AfterSource  string `db:"after_source"`
	AfterID      string `db:"after_id"`
	Source       string `db:"source"`
	Status       string `db:"status"`
	Prefix       string `db:"prefix"`
	PrefixLen    int    `db:"prefix_len"`
	Instance     string `db:"instance"`
	InstanceLike string `db:"instance_like"`
	OlderThan    any    `db:"older_than"`
	Review       int    `db:"review"`
	Limit        int    `db:"limit"`
}

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
	events, err := selectAs(ctx, s, s.db, "list events", s.q.EventList, listArgs{
		Cutoff: s.t(s.reviewCutoff()), At: s.t(curAt), AfterSource: curSource, AfterID: curID,
		Source: f.Source, Status: string(f.Status), Prefix: f.Prefix, PrefixLen: len([]rune(f.Prefix)),
		Instance: f.Instance, InstanceLike: "%" + audit.InstanceSep + f.Instance,
		OlderThan: s.t(olderThan), Review: review, Limit: f.Limit + 1}, eventRead.event)
	if err != nil {
		return audit.EventPage{}, err
	}
	page := audit.EventPage{Events: events}
	if len(events) > f.Limit {
		page.Events = events[:f.Limit]
		last := page.Events[f.Limit-1]
		page.Next = encodeCursor(last.LastSeen, last.Source, last.EventID)
	}
	return page, nil
}

// ReviewQueue returns the entries waiting for a person, oldest first.
func (s *Store) ReviewQueue(ctx context.Context, limit int) ([]audit.Event, error) {
	return selectAs(ctx, s, s.db, "read review queue", s.q.HistoryReadReviewQueue,
		map[string]any{"cutoff": s.t(s.reviewCutoff()), "limit": limit}, eventRead.event)
}

// StatusCounts returns how many events are in each status.
func (s *Store) StatusCounts(ctx context.Context) (map[audit.Status]int, error) {
	var rows []struct {
		Status audit.Status `db:"status"`
		N      int          `db:"n"`
	}
	if err := s.namedSelect(ctx, s.db, &rows, "count events", s.q.EventCount, nil); err != nil {
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

// historyPage reads one page of an event's lines (newest first from the
// index, returned oldest first), the counts by kind and the refused
// reports.
func (s *Store) historyPage(ctx context.Context, q any, d *audit.EventDetail, p audit.HistoryPage) error {
	arg := eventArgs{Source: d.Source, EventID: d.EventID, Before: p.Before, Limit: p.Limit + 1}
	lines, err := selectAs(ctx, s, q, "read history", s.q.HistoryReadPage, arg, historyRow.line)
	if err != nil {
		return err
	}
	if len(lines) > p.Limit {
		lines = lines[:p.Limit]
		d.HistoryNext = lines[p.Limit-1].ID
	}
	slices.Reverse(lines)
	d.History = lines
	if d.HistoryCounts, d.HistoryTotal, err = s.kindCounts(ctx, q, "count history", s.q.HistoryCount, arg); err != nil {
		return err
	}
	if d.HistoryCounts[audit.KindNotHolder] == 0 {
		return nil
	}
	if d.Refused, err = selectAs(ctx, s, q, "read refused reports", s.q.HistoryReadRefusedReports, arg, historyRow.line); err != nil {
		return err
	}
	slices.Reverse(d.Refused)
	return nil
}

// Lineage returns an execution, the chain above it (nearest first) and the
// executions that retry it.
func (s *Store) Lineage(ctx context.Context, id string) (audit.Exec, []audit.Exec, []audit.Exec, error) {
	var row executionRow
	if err := audit.ValidateExecutionID(id); err != nil {
		return audit.Exec{}, nil, nil, err
	}
	err := s.one(ctx, s.db, &row, "read execution", s.q.ExecutionRead, map[string]any{"execution_id": id})
	if isNoRows(err) {
		return audit.Exec{}, nil, nil, audit.Errorf(audit.CodeNotFound, "no execution %s", id)
	}
	if err != nil {
		return audit.Exec{}, nil, nil, err
	}
	x := *row.exec()
	var up []audit.Exec
	seen := map[string]bool{x.ID: true}
	for parent := x.RetryOf; parent != "" && !seen[parent] && len(up) < audit.MaxChain; {
		seen[parent] = true
		e := audit.Exec{ID: parent, Note: "not seen by the service"}
		err := s.one(ctx, s.db, &row, "read execution", s.q.ExecutionRead, map[string]any{"execution_id": parent})
		if err == nil {
			e = *row.exec()
		} else if !isNoRows(err) {
			return x, nil, nil, err
		}
		up = append(up, e)
		parent = e.RetryOf
	}
	exec := func(r executionRow) audit.Exec { return *r.exec() }
	down, err := selectAs(ctx, s, s.db, "read retries", s.q.ExecutionReadRetries, map[string]any{"execution_id": id}, exec)
	return x, up, down, err
}

// ExecutionEvents returns the events an execution touched.
func (s *Store) ExecutionEvents(ctx context.Context, id string) ([]audit.TouchedEvent, error) {
	return selectAs(ctx, s, s.db, "read touched events", s.q.EventExecutionReadTouched, map[string]any{"execution_id": id},
		func(r presenceRow) audit.TouchedEvent {
			return audit.TouchedEvent{EventKey: audit.EventKey{Source: r.Source, EventID: r.EventID}, Role: r.Role,
				Delivery: audit.Delivery(r.Delivery), At: r.FirstSeen.Time}
		})
}

// eventRead is an event's row as the pages read it, with what the read
// adds; executionRead an execution's row with its presence on an event.
type (
	eventRead struct {
		eventRow
		NeedsReview flag   `db:"needs_review"`
		LastNews    string `db:"last_news"`
	}
	executionRead struct {
		executionRow
		Presence presenceRow `db:"p"`
	}
)

func (r eventRead) event() audit.Event {
	return audit.Event{Entry: *r.entry(), NeedsReview: bool(r.NeedsReview), LastNews: r.LastNews}
}

func (r executionRead) execution() audit.EventExecution {
	return audit.EventExecution{Exec: *r.exec(), Presence: r.Presence.presence(), TouchedAt: r.Presence.FirstSeen.Time}
}
