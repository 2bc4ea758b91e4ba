package store

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/retryaudit/retryaudit/audit"
)

// count adds one to each metric for the hour of now, in the caller's
// transaction: the numbers are committed with what they count.
func (s *Store) count(ctx context.Context, tx *sqlx.Tx, now time.Time, source, workflowID string, metrics ...string) error {
	arg := map[string]any{"hour": s.t(now.UTC().Truncate(time.Hour)), "source": source, "workflow_id": workflowID,
		"shard": s.shard(tx)}
	for _, m := range slices.Sorted(slices.Values(metrics)) {
		arg["metric"] = m
		if _, err := s.namedExec(ctx, tx, "count", s.q.StatsAdd, arg); err != nil {
			return err
		}
	}
	return nil
}

// shard returns the counter shard of a transaction: all its counts go to
// one shard, so that two transactions meet on a counter row only when they
// drew the same shard (one in statsShards), and then lock their rows in one
// order (metrics sorted), never waiting for each other in a circle.
func (s *Store) shard(tx *sqlx.Tx) int {
	v, _ := s.shards.LoadOrStore(tx, rand.IntN(audit.StatsShards))
	return v.(int)
}

// resolutionWeeks is how far back the overview reads resolution times.
const resolutionWeeks = 8

// overviewArgs are the parameters of the overview's reads.
type overviewArgs struct {
	From   any    `db:"from"` // the window's first hour
	Day    any    `db:"day"`  // its first day
	To     any    `db:"to"`
	Since  any    `db:"since"` // the resolution times' first
	Cutoff any    `db:"cutoff"`
	Source string `db:"source"`
}

// Overview reads the numbers of the overview: the rollups, the review
// queue, the resolution times and the alerts' kinds and states. It reads no
// event row but those waiting for review, and no outbox row but the
// window's alerts, so it costs about the same at a million events as at a
// thousand.
func (s *Store) Overview(ctx context.Context, f audit.StatsFilter) (audit.Overview, error) {
	now := s.now()
	if f.To.IsZero() {
		f.To = now
	}
	if f.From.IsZero() {
		f.From = f.To.Add(-audit.StatsWindow)
	}
	o := audit.Overview{From: f.From, To: f.To}
	var q any = s.db
	if s.drv.Snapshot() {
		tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
		if err != nil {
			return o, s.dbError("begin", err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, s.q.OverviewSnapshot); err != nil {
			return o, s.dbError("begin", err)
		}
		q = tx
	}
	arg := overviewArgs{From: s.t(f.From.UTC().Truncate(time.Hour)), To: s.t(f.To),
		Day: s.t(f.From.UTC().Truncate(24 * time.Hour)), Source: f.Source, Cutoff: s.t(s.reviewCutoff()),
		Since: s.t(f.To.Add(-resolutionWeeks * 7 * 24 * time.Hour))}
	for _, r := range []struct {
		dest      any
		op, query string
	}{{&o.Hourly, "read counters", s.q.OverviewHours}, {&o.Daily, "read counters", s.q.OverviewDays},
		{&o.Groups, "read counters", s.q.OverviewByWorkflow},
		{&o.InReview, "count review queue", s.q.EventCountInReviewByWorkflow},
		{&o.Resolutions, "read resolutions", s.q.ResolutionRead},
		{&o.Alerts, "count alerts", s.q.OutboxCountAlertsByKind}} {
		if err := s.namedSelect(ctx, q, r.dest, r.op, r.query, arg); err != nil {
			return o, err
		}
	}
	for _, c := range o.InReview {
		o.ReviewTotal += c.N
	}
	var err error
	o.Review, err = selectAs(ctx, s, q, "read review queue", s.q.OverviewInReview, arg, func(r eventRow) audit.ReviewAge {
		return audit.ReviewAge{EventKey: audit.EventKey{Source: r.Source, EventID: r.EventID}, Reason: r.Review,
			Since: r.UpdatedAt.Time}
	})
	return o, err
}

// CompactStats merges the shards of past hours into one row and folds the
// hours older than 48 h into days, all in one transaction: a count is never
// lost nor counted twice. It leaves the last ten minutes alone, so that it
// never meets a claim still counting into them. Days older than 400 are
// deleted.
func (s *Store) CompactStats(ctx context.Context) error {
	now := s.now().UTC()
	fold := now.Add(-48 * time.Hour).Truncate(time.Hour)
	arg := map[string]any{"closed": s.t(now.Add(-10 * time.Minute).Truncate(time.Hour)), "fold": s.t(fold),
		"before": s.t(now.Add(-400 * 24 * time.Hour))}
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		var hours []time.Time
		if err := s.namedSelect(ctx, tx, &hours, "read old hours", s.q.StatsReadOldHours, arg); err != nil {
			return err
		}
		if _, err := s.execEach(ctx, tx, arg, "merge shards", s.q.StatsMergeShards, "merge shards",
			s.q.StatsDeleteMergedShards); err != nil {
			return err
		}
		days := map[time.Time]bool{}
		for _, h := range hours {
			days[h.UTC().Truncate(24*time.Hour)] = true
		}
		for d := range days {
			end := d.Add(24 * time.Hour)
			if end.After(fold) {
				end = fold
			}
			arg["day"], arg["end"] = s.t(d), s.t(end)
			if _, err := s.execEach(ctx, tx, arg, "fold into days", s.q.StatsFoldHours, "fold into days",
				s.q.StatsDeleteFoldedHours); err != nil {
				return err
			}
		}
		_, err := s.namedExec(ctx, tx, "forget old days", s.q.StatsForgetOldDays, arg)
		return err
	})
}
