-- Counters (stats_hourly, stats_daily), resolution times and the overview.
-- The format of these files: catalogue.go. An empty :source is every source.

-- name: OverviewByWorkflow
SELECT source, workflow_id, metric, sum(n) AS n FROM (
  SELECT source, workflow_id, metric, n FROM stats_hourly
  WHERE hour >= :from AND hour <= :to AND (:source = '' OR source = :source)
  UNION ALL
  SELECT source, workflow_id, metric, n FROM stats_daily
  WHERE day >= :day AND day <= :to AND (:source = '' OR source = :source)
  ) c GROUP BY source, workflow_id, metric ORDER BY source, workflow_id, metric

-- name: OverviewDays
SELECT day AS hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_daily
  WHERE day >= :day AND day <= :to AND (:source = '' OR source = :source) GROUP BY day, metric ORDER BY day, metric

-- name: OverviewHours
SELECT hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_hourly
  WHERE hour >= :from AND hour <= :to AND (:source = '' OR source = :source) GROUP BY hour, metric ORDER BY hour, metric

-- name: OverviewInReview
SELECT source, event_id, review_reason, updated_at FROM webhook_events
  WHERE status = 'processing' AND (review_reason <> '' OR updated_at < :cutoff)
  AND (:source = '' OR source = :source) ORDER BY updated_at LIMIT 1000

-- name: ResolutionRead
SELECT resolved_at, source, seconds FROM resolution_times
  WHERE resolved_at >= :since AND resolved_at <= :to AND (:source = '' OR source = :source) ORDER BY resolved_at

-- name: StatsAdd
INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  VALUES (:hour, :source, :workflow_id, :metric, :shard, 1)
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + 1

-- name: StatsDeleteFoldedHours
DELETE FROM stats_hourly WHERE hour >= :day AND hour < :end

-- name: StatsDeleteMergedShards
DELETE FROM stats_hourly WHERE hour < :closed AND shard <> 0

-- name: StatsFoldHours
INSERT INTO stats_daily (day, source, workflow_id, metric, n)
  SELECT :day, source, workflow_id, metric, sum(n) FROM stats_hourly WHERE hour >= :day AND hour < :end
  GROUP BY source, workflow_id, metric
  ON CONFLICT (day, source, workflow_id, metric) DO UPDATE SET n = stats_daily.n + excluded.n

-- name: StatsForgetOldDays
DELETE FROM stats_daily WHERE day < :before

-- name: StatsMergeShards
INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT hour, source, workflow_id, metric, 0, sum(n) FROM stats_hourly WHERE hour < :closed AND shard <> 0
  GROUP BY hour, source, workflow_id, metric
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n

-- name: StatsReadOldHours
SELECT DISTINCT hour FROM stats_hourly WHERE hour < :fold
