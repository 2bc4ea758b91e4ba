-- Counters (stats_hourly, stats_daily) and the overview. PostgreSQL's
-- statements where it differs from SQLite: the rest are in ../../sql/.

-- The counters a batch adds up (:counters, a row set of source,
-- workflow_id, metric, n) into the hour's shard, a CTE of LedgerWrite.
-- fragment: counters
counters AS (
  INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT CAST(:hour AS timestamptz), j->>'source', j->>'workflow_id', j->>'metric', CAST(:shard AS integer),
  CAST(j->>'n' AS integer)
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:counters AS jsonb)))) AS j
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n
  RETURNING 1
)

-- Prepares the overview's read-only snapshot: no query of the page reads more
-- than some thousands of rows, and a parallel worker takes longer to start
-- than such a query runs (118 ms waiting for the worker of an 11 ms count).
-- name: OverviewSnapshot
SET LOCAL max_parallel_workers_per_gather = 0