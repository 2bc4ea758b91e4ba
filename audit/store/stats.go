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

// claimMetrics are what one claim counts.
func claimMetrics(res audit.ClaimResult) []string {
	if res.Delivery == audit.DeliverySameExecution {
		return nil
	}
	m := []string{audit.MetricDelivery}
	switch {
	case res.Delivery == audit.DeliveryFirst:
		m = append(m, audit.MetricFirst)
	case !res.Process:
		m = append(m, audit.MetricStopped+string(res.Class))
	case res.Class == audit.ClassManualRetry:
		m = append(m, audit.MetricRetry)
	case res.Class == audit.ClassAfterFailure:
		m = append(m, audit.MetricCapture)
	}
	return m
}

// count adds one to each metric for the hour of now, in the caller's
// transaction: the numbers are committed with what they count.
func (s *Store) count(ctx context.Context, tx *sqlx.Tx, now time.Time, source, workflowID string, metrics ...string) error {
	hour := s.d.t(now.UTC().Truncate(time.Hour))
	shard := s.shard(tx)
	for _, m := range slices.Sorted(slices.Values(metrics)) {
		if _, err := s.exec(ctx, tx, "count", `INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
			VALUES (?, ?, ?, ?, ?, 1)
			ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + 1`,
			hour, source, workflowID, m, shard); err != nil {
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

// countFor counts metrics under the workflow the service knows executionID
// by (none when it knows none).
func (s *Store) countFor(ctx context.Context, tx *sqlx.Tx, now time.Time, source, executionID string, metrics ...string) error {
	var wf string
	err := s.get(ctx, tx, &wf, "read workflow", `SELECT workflow_id FROM executions WHERE execution_id = ?`, executionID)
	if err != nil && !isNoRows(err) {
		return err
	}
	return s.count(ctx, tx, now, source, wf, metrics...)
}

// alertCounts counts the alerts opened in a window by kind and state, from
// the index on (created_at, source, alert_kind, state) of alert rows.
const alertCounts = `SELECT alert_kind, state, count(*) AS n FROM outbox
	WHERE kind = 'alert' AND created_at >= ? AND created_at <= ? AND (? = '' OR source = ?)
	GROUP BY alert_kind, state ORDER BY alert_kind, state`

// overviewSnapshot prepares the transaction the overview reads in, per
// dialect. PostgreSQL reads all the page's numbers in one snapshot, and
// without parallel workers: no query reads more than some thousands of
// rows, and a worker takes longer to start than such a query runs (seen at a
// million events on two busy cores: 118 ms waiting for the worker of an
// 11 ms count). SQLite reads without a transaction, which would take the
// write lock; its reads beside the one writer are consistent enough for a
// page.
var overviewSnapshot = map[string]string{
	"postgres": `SET LOCAL max_parallel_workers_per_gather = 0`,
	"sqlite":   "",
}

// resolutionWeeks is how far back the overview reads resolution times.
const resolutionWeeks = 8

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
	if setup := overviewSnapshot[s.d.name]; setup != "" {
		tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
		if err != nil {
			return o, dbError("begin", err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, setup); err != nil {
			return o, dbError("begin", err)
		}
		q = tx
	}
	from, to := s.d.t(f.From.UTC().Truncate(time.Hour)), s.d.t(f.To)
	day := s.d.t(f.From.UTC().Truncate(24 * time.Hour))
	for _, q := range []struct {
		dest  *[]audit.Counter
		query string
		from  any
	}{
		{&o.Hourly, `SELECT hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_hourly
			WHERE hour >= ? AND hour <= ? AND (? = '' OR source = ?) GROUP BY hour, metric ORDER BY hour, metric`, from},
		{&o.Daily, `SELECT day AS hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_daily
			WHERE day >= ? AND day <= ? AND (? = '' OR source = ?) GROUP BY day, metric ORDER BY day, metric`, day},
		{&o.Groups, `SELECT source, workflow_id, metric, sum(n) AS n FROM (
			SELECT source, workflow_id, metric, n FROM stats_hourly WHERE hour >= ? AND hour <= ? AND (? = '' OR source = ?)
			UNION ALL
			SELECT source, workflow_id, metric, n FROM stats_daily WHERE day >= ? AND day <= ? AND (? = '' OR source = ?)
			) c GROUP BY source, workflow_id, metric ORDER BY source, workflow_id, metric`, nil},
	} {
		args := []any{q.from, to, f.Source, f.Source}
		if q.from == nil {
			args = []any{from, to, f.Source, f.Source, day, to, f.Source, f.Source}
		}
		if err := s.selectAll(ctx, q, q.dest, "read counters", q.query, args...); err != nil {
			return o, err
		}
	}
	cutoff := s.d.t(s.reviewCutoff())
	if err := s.selectAll(ctx, q, &o.InReview, "count review queue", `SELECT w.source,
		COALESCE(x.workflow_id, '') AS workflow_id, count(*) AS n
		FROM webhook_events w LEFT JOIN executions x ON x.execution_id = w.holder_execution_id
		WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < ?) AND (? = '' OR w.source = ?)
		GROUP BY w.source, COALESCE(x.workflow_id, '')`, cutoff, f.Source, f.Source); err != nil {
		return o, err
	}
	for _, c := range o.InReview {
		o.ReviewTotal += c.N
	}
	if err := s.selectAll(ctx, q, &o.Review, "read review queue", `SELECT source, event_id, review_reason, updated_at
		FROM webhook_events WHERE status = 'processing' AND (review_reason <> '' OR updated_at < ?)
		AND (? = '' OR source = ?) ORDER BY updated_at LIMIT 1000`, cutoff, f.Source, f.Source); err != nil {
		return o, err
	}
	if err := s.selectAll(ctx, q, &o.Resolutions, "read resolutions", `SELECT resolved_at, source, seconds
		FROM resolution_times WHERE resolved_at >= ? AND resolved_at <= ? AND (? = '' OR source = ?)
		ORDER BY resolved_at`, s.d.t(f.To.Add(-resolutionWeeks*7*24*time.Hour)), to, f.Source, f.Source); err != nil {
		return o, err
	}
	err := s.selectAll(ctx, q, &o.Alerts, "count alerts", alertCounts, from, to, f.Source, f.Source)
	return o, err
}

// CompactStats merges the shards of past hours into one row and folds the
// hours older than 48 h into days, all in one transaction: a count is never
// lost nor counted twice. It leaves the last ten minutes alone, so that it
// never meets a claim still counting into them. Days older than 400 are
// deleted.
func (s *Store) CompactStats(ctx context.Context) error {
	now := s.now().UTC()
	closed := s.d.t(now.Add(-10 * time.Minute).Truncate(time.Hour))
	fold := now.Add(-48 * time.Hour).Truncate(time.Hour)
	type step struct {
		op, query string
		args      []any
	}
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		steps := []step{
			{"merge shards", `INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
				SELECT hour, source, workflow_id, metric, 0, sum(n) FROM stats_hourly WHERE hour < ? AND shard <> 0
				GROUP BY hour, source, workflow_id, metric
				ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n`,
				[]any{closed}},
			{"merge shards", `DELETE FROM stats_hourly WHERE hour < ? AND shard <> 0`, []any{closed}},
		}
		var hours []time.Time
		if err := s.selectAll(ctx, tx, &hours, "read old hours", `SELECT DISTINCT hour FROM stats_hourly WHERE hour < ?`,
			s.d.t(fold)); err != nil {
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
			steps = append(steps,
				step{"fold into days", `INSERT INTO stats_daily (day, source, workflow_id, metric, n)
					SELECT ?, source, workflow_id, metric, sum(n) FROM stats_hourly WHERE hour >= ? AND hour < ?
					GROUP BY source, workflow_id, metric
					ON CONFLICT (day, source, workflow_id, metric) DO UPDATE SET n = stats_daily.n + excluded.n`,
					[]any{s.d.t(d), s.d.t(d), s.d.t(end)}},
				step{"fold into days", `DELETE FROM stats_hourly WHERE hour >= ? AND hour < ?`, []any{s.d.t(d), s.d.t(end)}})
		}
		steps = append(steps, step{"forget old days", `DELETE FROM stats_daily WHERE day < ?`,
			[]any{s.d.t(now.Add(-400 * 24 * time.Hour))}})
		for _, st := range steps {
			if _, err := s.exec(ctx, tx, st.op, st.query, st.args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordResolution keeps how long an entry's unknown outcome (or error)
// waited for the person who resolved it now.
func (s *Store) recordResolution(ctx context.Context, tx *sqlx.Tx, source, eventID, item string, now time.Time) error {
	var since []time.Time
	if err := s.selectAll(ctx, tx, &since, "read review start", `SELECT at FROM event_history
		WHERE source = ? AND event_id = ? AND item = ? AND ((kind = 'outcome' AND decision = 'unknown') OR kind = 'error')
		ORDER BY id DESC LIMIT 1`, source, eventID, item); err != nil || len(since) == 0 {
		return err
	}
	_, err := s.exec(ctx, tx, "record resolution", `INSERT INTO resolution_times (resolved_at, source, seconds)
		VALUES (?, ?, ?)`, s.d.t(now), source, now.Sub(since[0]).Seconds())
	return err
}
