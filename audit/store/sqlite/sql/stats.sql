-- Counters (stats_hourly, stats_daily), resolution times and the overview.
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- SQLite: empty: the overview reads outside a transaction, which would take
-- the write lock.
-- name: OverviewSnapshot

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: StatsBatchAdd
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.metric' AS metric, j.value->>'$.n' AS n FROM json_each(:counters) AS j)
  INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT :hour, source, workflow_id, metric, :shard, n FROM r WHERE true
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n
