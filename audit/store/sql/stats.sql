-- Counters (stats_hourly, stats_daily), resolution times and the overview.
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- name: OverviewByWorkflow
SELECT source, workflow_id, metric, sum(n) AS n FROM (
  SELECT source, workflow_id, metric, n FROM stats_hourly WHERE hour >= ? AND hour <= ? AND (? = '' OR source = ?)
  UNION ALL
  SELECT source, workflow_id, metric, n FROM stats_daily WHERE day >= ? AND day <= ? AND (? = '' OR source = ?)
  ) c GROUP BY source, workflow_id, metric ORDER BY source, workflow_id, metric

-- name: OverviewDays
SELECT day AS hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_daily
  WHERE day >= ? AND day <= ? AND (? = '' OR source = ?) GROUP BY day, metric ORDER BY day, metric

-- name: OverviewHours
SELECT hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_hourly
  WHERE hour >= ? AND hour <= ? AND (? = '' OR source = ?) GROUP BY hour, metric ORDER BY hour, metric

-- name: OverviewInReview
SELECT source, event_id, review_reason, updated_at
  FROM webhook_events WHERE status = 'processing' AND (review_reason <> '' OR updated_at < ?)
  AND (? = '' OR source = ?) ORDER BY updated_at LIMIT 1000

-- name: ResolutionRead
SELECT resolved_at, source, seconds
  FROM resolution_times WHERE resolved_at >= ? AND resolved_at <= ? AND (? = '' OR source = ?)
  ORDER BY resolved_at

-- name: ResolutionRecord
INSERT INTO resolution_times (resolved_at, source, seconds)
  VALUES (?, ?, ?)

-- name: StatsAdd
INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  VALUES (?, ?, ?, ?, ?, 1)
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + 1

-- name: StatsDeleteFoldedHours
DELETE FROM stats_hourly WHERE hour >= ? AND hour < ?

-- name: StatsDeleteMergedShards
DELETE FROM stats_hourly WHERE hour < ? AND shard <> 0

-- name: StatsFoldHours
INSERT INTO stats_daily (day, source, workflow_id, metric, n)
  SELECT ?, source, workflow_id, metric, sum(n) FROM stats_hourly WHERE hour >= ? AND hour < ?
  GROUP BY source, workflow_id, metric
  ON CONFLICT (day, source, workflow_id, metric) DO UPDATE SET n = stats_daily.n + excluded.n

-- name: StatsForgetOldDays
DELETE FROM stats_daily WHERE day < ?

-- name: StatsMergeShards
INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT hour, source, workflow_id, metric, 0, sum(n) FROM stats_hourly WHERE hour < ? AND shard <> 0
  GROUP BY hour, source, workflow_id, metric
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n

-- name: StatsReadOldHours
SELECT DISTINCT hour FROM stats_hourly WHERE hour < ?
