// Package digest makes the daily digest: once a day, at the configured
// time, what the last 24 hours brought and what waits for a person, sent
// to Slack through the outbox. Every instance looks each minute; one row
// per day, written with the digest's outbox row in one transaction, makes
// it once across instances, and the outbox sends it once, however long
// Slack is down.
package digest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/notify"
)

// keepDays is how long the record of a day's digest is kept.
const keepDays = 400

// Maker makes the daily digest.
type Maker struct {
	Store *store.Store
	At    time.Duration  // the time of day, since midnight
	TZ    *time.Location // the day's zone (UTC when nil)
	Now   func() time.Time
	Log   *slog.Logger
}

// Tick makes today's digest when its time has come and no instance made
// it yet: it tells the 24 hours before its time, however late it is made
// (an instance down at the time makes it when it starts). It reports whether this call made it (sent or, with nothing to
// say, recorded as not needed).
func (m *Maker) Tick(ctx context.Context) (bool, error) {
	now := m.now()
	day, slot := m.today(now)
	if now.Before(slot) {
		return false, nil
	}
	made, err := m.made(ctx, day)
	if err != nil || made {
		return false, err
	}
	d, err := m.Build(ctx, day, slot.Add(-24*time.Hour), slot)
	if err != nil {
		return false, err
	}
	ok, err := m.record(ctx, d, now)
	if err != nil || !ok {
		return false, err
	}
	if d.Empty() {
		m.log().Info("digest: nothing to say today; none sent", "day", day)
	} else {
		m.log().Info("digest: queued for Slack", "day", day, "events", d.Events, "waiting", d.WaitTotal)
	}
	return true, nil
}

func (m *Maker) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Maker) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// today returns the day of now in the digest's zone and the moment its
// digest is due.
func (m *Maker) today(now time.Time) (string, time.Time) {
	tz := m.TZ
	if tz == nil {
		tz = time.UTC
	}
	local := now.In(tz)
	y, mo, d := local.Date()
	slot := time.Date(y, mo, d, int(m.At/time.Hour), int(m.At%time.Hour/time.Minute), 0, 0, tz)
	return local.Format(time.DateOnly), slot
}

// Build reads what the digest says for the window from..to from the
// store's reads: the overview's counters and review queue, and the errors
// reconciliation and the execution hooks found.
func (m *Maker) Build(ctx context.Context, day string, from, to time.Time) (notify.Digest, error) {
	d := notify.Digest{Day: day, From: from, To: to}
	o, err := m.Store.Overview(ctx, audit.StatsFilter{From: from, To: to})
	if err != nil {
		return d, err
	}
	for _, c := range o.Groups {
		switch {
		case c.Metric == audit.MetricFirst:
			d.Events += c.N
		case strings.HasPrefix(c.Metric, audit.MetricStopped):
			d.Stopped += c.N
		case c.Metric == audit.MetricRetry:
			d.Retries += c.N
		case c.Metric == audit.MetricResolved:
			d.Resolved += c.N
		}
	}
	d.WaitTotal = max(o.ReviewTotal, len(o.Review))
	d.Waiting = o.Review[:min(len(o.Review), notify.MaxDigestWaiting)]
	for _, kind := range []string{audit.N8NErrorReconcile, audit.N8NErrorHook} {
		n, err := m.errorsSince(ctx, kind, from)
		if err != nil {
			return d, err
		}
		d.Unreported += n
	}
	return d, nil
}

// maxPages bounds the errors read for a count: past it, the count says
// "at least".
const maxPages = 20

// errorsSince counts the errors of a kind received since from, newest
// first, page by page.
func (m *Maker) errorsSince(ctx context.Context, kind string, from time.Time) (int, error) {
	n := 0
	before := int64(0)
	for range maxPages {
		recs, next, err := m.Store.Errors(ctx, audit.N8NErrorFilter{Kind: kind, Before: before, Limit: 500})
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			if r.ReceivedAt.Before(from) {
				return n, nil
			}
			n++
		}
		if next == 0 {
			return n, nil
		}
		before = next
	}
	return n, nil
}

// made reports whether the day's digest was made already.
func (m *Maker) made(ctx context.Context, day string) (bool, error) {
	var n int
	err := m.named(m.Store.DB(), `SELECT count(*) FROM slack_digests WHERE day = :day`, map[string]any{"day": day},
		func(q string, args []any) error { return m.Store.DB().GetContext(ctx, &n, q, args...) })
	if err != nil {
		return false, fmt.Errorf("digest: read the day's record: %w", err)
	}
	return n > 0, nil
}

// record writes the day's row and, when there is something to say, the
// digest's outbox row, in one transaction. It reports false when another
// instance recorded the day first.
func (m *Maker) record(ctx context.Context, d notify.Digest, now time.Time) (bool, error) {
	tx, err := m.Store.DB().BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("digest: begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.NamedExecContext(ctx, `INSERT INTO slack_digests (day) VALUES (:day) ON CONFLICT (day) DO NOTHING`,
		map[string]any{"day": d.Day})
	if err != nil {
		return false, fmt.Errorf("digest: record the day: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err // another instance made it
	}
	if !d.Empty() {
		payload, err := notify.DigestPayload(d, now)
		if err != nil {
			return false, fmt.Errorf("digest: encode: %w", err)
		}
		var id int64
		arg := map[string]any{"thread_key": notify.DigestThread(d.Day), "kind": notify.RowDigest, "payload": payload}
		err = m.named(tx, `INSERT INTO outbox (thread_key, kind, payload, state) VALUES (:thread_key, :kind, :payload, 'pending')
			RETURNING id`, arg, func(q string, args []any) error { return tx.GetContext(ctx, &id, q, args...) })
		if err != nil {
			return false, fmt.Errorf("digest: write the outbox row: %w", err)
		}
		if _, err := tx.NamedExecContext(ctx, `UPDATE slack_digests SET outbox_id = :id WHERE day = :day`,
			map[string]any{"id": id, "day": d.Day}); err != nil {
			return false, fmt.Errorf("digest: record the outbox row: %w", err)
		}
	}
	cutoff := now.AddDate(0, 0, -keepDays).Format(time.DateOnly)
	if _, err := tx.NamedExecContext(ctx, `DELETE FROM slack_digests WHERE day < :cutoff`,
		map[string]any{"cutoff": cutoff}); err != nil {
		return false, fmt.Errorf("digest: forget old days: %w", err)
	}
	// Retention prunes an event's or an error's rows; the digests' are
	// this package's to forget.
	if _, err := tx.NamedExecContext(ctx, `DELETE FROM outbox WHERE thread_key >= :first AND thread_key < :before`,
		map[string]any{"first": notify.DigestThread(""), "before": notify.DigestThread(cutoff)}); err != nil {
		return false, fmt.Errorf("digest: forget old digests: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("digest: commit: %w", err)
	}
	return true, nil
}

// named binds a named statement for q's database and runs it with fn.
func (m *Maker) named(q interface{ Rebind(string) string }, query string, arg map[string]any,
	fn func(q string, args []any) error) error {
	bound, args, err := sqlx.Named(query, arg)
	if err != nil {
		return err
	}
	return fn(q.Rebind(bound), args)
}
