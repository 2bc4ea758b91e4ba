-- n8n's executions (executions) and which entries each touched
-- (event_executions).
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- SQLite: no row lock to take (one writer).
-- name: EventExecutionBatchEvents
WITH v AS (SELECT j.value->>'$.id' AS v_id FROM json_each(:executions) AS j)
SELECT ee.execution_id, w.source, w.event_id, w.status, w.holder_execution_id, w.updated_at, w.deliveries, w.crm_ref
  FROM event_executions AS ee JOIN webhook_events AS w ON w.source = ee.source AND w.event_id = ee.event_id
  WHERE ee.execution_id IN (SELECT v_id FROM v)
  ORDER BY ee.execution_id, ee.first_seen_at, ee.source, ee.event_id

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventExecutionBatchMarkActed
WITH r AS (SELECT j.value->>'$.source' AS r_source, j.value->>'$.event_id' AS r_event_id,
  j.value->>'$.execution_id' AS r_execution_id FROM json_each(:acted) AS j)
  UPDATE event_executions SET acted = (1 = 1) FROM r
  WHERE source = r_source AND event_id = r_event_id AND execution_id = r_execution_id AND NOT acted

-- Records that each execution of a round presented its key, and returns
-- the keys it presented for the first time. :presented rows carry the
-- delivery and class decided before. (PostgreSQL: empty, it learns this with
-- the entries and writes it in ClaimBatchWrite.)
-- name: EventExecutionBatchPresent
WITH v AS (
  SELECT j.value->>'$.source' AS v_source, j.value->>'$.event_id' AS v_event_id,
  j.value->>'$.execution_id' AS v_execution_id, j.value->>'$.delivery' AS v_delivery, j.value->>'$.acted' AS v_acted,
  j.value->>'$.delivery_id' AS v_delivery_id, j.value->>'$.workflow_id' AS v_workflow_id, j.value->>'$.class' AS v_class
  FROM json_each(:presented) AS j
)
INSERT INTO event_executions (source, event_id, execution_id, role, delivery, acted, delivery_id, workflow_id,
  class, first_seen_at)
  SELECT v_source, v_event_id, v_execution_id, 'claim', v_delivery, v_acted, v_delivery_id,
  v_workflow_id, v_class, :now FROM v WHERE true
  ON CONFLICT (source, event_id, execution_id) DO UPDATE SET role = 'claim', delivery = excluded.delivery,
  acted = event_executions.acted OR excluded.acted, delivery_id = excluded.delivery_id,
  workflow_id = excluded.workflow_id, class = excluded.class
  WHERE event_executions.role <> 'claim'
  RETURNING source, event_id

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventExecutionBatchRecordErrors
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id FROM json_each(:roles) AS j)
INSERT INTO event_executions (source, event_id, execution_id, role, first_seen_at)
  SELECT source, event_id, execution_id, 'error', :now FROM r WHERE true
  ON CONFLICT (source, event_id, execution_id) DO NOTHING

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventExecutionBatchReporters
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id FROM json_each(:reporters) AS j)
INSERT INTO event_executions (source, event_id, execution_id, role, first_seen_at)
  SELECT source, event_id, execution_id, 'report', :now FROM r WHERE true
  ON CONFLICT (source, event_id, execution_id) DO NOTHING

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ExecutionBatchErrorSeen
WITH r AS (SELECT j.value->>'$.id' AS r_id, j.value->>'$.workflow_id' AS r_workflow_id,
  j.value->>'$.workflow_name' AS r_workflow_name, j.value->>'$.mode' AS r_mode, j.value->>'$.url' AS r_url
  FROM json_each(:executions) AS j)
UPDATE executions SET workflow_id = CASE WHEN r_workflow_id <> '' THEN r_workflow_id ELSE workflow_id END,
  workflow_name = CASE WHEN r_workflow_name <> '' THEN r_workflow_name ELSE workflow_name END,
  mode = CASE WHEN r_mode <> '' THEN r_mode ELSE mode END,
  n8n_url = CASE WHEN r_url <> '' THEN r_url ELSE n8n_url END,
  last_seen_at = :now FROM r WHERE execution_id = r_id AND superseded_at IS NULL
  RETURNING execution_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of, root_execution_id, n8n_url,
  lineage_note, first_seen_at, last_seen_at

-- name: ExecutionBatchRead
WITH v AS (SELECT j.value->>'$.id' AS id FROM json_each(:executions) AS j)
SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, mode, n8n_status, first_seen_at, last_seen_at,
  started_at, ended_at, checked_at FROM executions WHERE n8n_id IN (SELECT id FROM v) AND superseded_at IS NULL

-- name: ExecutionBatchReadKnown
WITH v AS (SELECT j.value->>'$.id' AS id FROM json_each(:executions) AS j)
SELECT n8n_id FROM executions WHERE n8n_id IN (SELECT id FROM v) AND superseded_at IS NULL
  AND (retry_of <> '' OR mode <> '')

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ExecutionBatchSeen
WITH r AS (SELECT j.value->>'$.id' AS r_id, j.value->>'$.workflow_id' AS r_workflow_id FROM json_each(:executions) AS j)
UPDATE executions SET workflow_id = CASE WHEN r_workflow_id <> '' THEN r_workflow_id ELSE workflow_id END,
  last_seen_at = :now FROM r WHERE execution_id = r_id

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ExecutionBatchUpsert
WITH r AS (SELECT j.value->>'$.id' AS id, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.mode' AS mode,
  j.value->>'$.claimed_retry_of' AS claimed_retry_of, j.value->>'$.note' AS note FROM json_each(:executions) AS j)
  INSERT INTO executions (execution_id, n8n_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at)
  SELECT id, id, workflow_id, workflow_name, mode, '', claimed_retry_of, id, '', note, :now, :now
  FROM r WHERE true ORDER BY id
  ON CONFLICT (execution_id) DO UPDATE SET
{{execution_merge}}
