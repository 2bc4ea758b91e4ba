-- n8n's executions (executions) and which entries each touched
-- (event_executions).
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- An execution seen again takes what it says now, where it says anything
-- (ExecutionUpsert, and the batches' upserts: EventBatchCapture,
-- ExecutionBatchUpsert).
-- fragment: execution_merge
  workflow_id = CASE WHEN excluded.workflow_id <> '' THEN excluded.workflow_id ELSE executions.workflow_id END,
  workflow_name = CASE WHEN excluded.workflow_name <> '' THEN excluded.workflow_name ELSE executions.workflow_name END,
  mode = CASE WHEN excluded.mode <> '' THEN excluded.mode ELSE executions.mode END,
  lineage_note = CASE WHEN excluded.lineage_note <> '' THEN excluded.lineage_note ELSE executions.lineage_note END,
  claimed_retry_of = CASE WHEN excluded.claimed_retry_of <> '' THEN excluded.claimed_retry_of
  ELSE executions.claimed_retry_of END,
  last_seen_at = excluded.last_seen_at

-- name: EventExecutionCount
SELECT count(*) FROM event_executions WHERE source = ? AND event_id = ?

-- name: EventExecutionFindEvents
SELECT source, event_id FROM event_executions
  WHERE execution_id = ? ORDER BY first_seen_at, source, event_id

-- name: EventExecutionList
SELECT x.execution_id, x.workflow_id,
  x.workflow_name, x.mode, x.retry_of, x.claimed_retry_of, x.root_execution_id, x.n8n_url, x.lineage_note,
  x.first_seen_at, x.last_seen_at, ee.role, ee.delivery, ee.acted, ee.delivery_id, ee.class,
  ee.first_seen_at AS touched_at
  FROM event_executions ee JOIN executions x ON x.execution_id = ee.execution_id
  WHERE ee.source = ? AND ee.event_id = ? ORDER BY ee.first_seen_at, x.execution_id LIMIT ?

-- name: EventExecutionReadTouched
SELECT source, event_id, role, delivery,
  first_seen_at FROM event_executions WHERE execution_id = ? ORDER BY first_seen_at

-- name: ExecutionDeleteScratch
DELETE FROM executions WHERE execution_id LIKE :executions

-- name: ExecutionPrune
DELETE FROM executions WHERE execution_id IN (
  SELECT x.execution_id FROM executions x WHERE x.last_seen_at < :before
  AND NOT EXISTS (SELECT 1 FROM event_executions e WHERE e.execution_id = x.execution_id)
  AND NOT EXISTS (SELECT 1 FROM n8n_errors r WHERE r.execution_id = x.execution_id)
  AND NOT EXISTS (SELECT 1 FROM executions c WHERE c.retry_of = x.execution_id)
  LIMIT :batch)

-- name: ExecutionReRoot
UPDATE executions SET root_execution_id = :root
  WHERE root_execution_id = :id AND execution_id <> :id

-- name: ExecutionRead
SELECT execution_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at FROM executions WHERE execution_id = ?

-- name: ExecutionReadCurrent
SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, n8n_status, first_seen_at, last_seen_at, started_at,
  ended_at, checked_at FROM executions WHERE n8n_id = :raw_id AND superseded_at IS NULL

-- name: ExecutionReadKnownLineage
SELECT retry_of, mode, workflow_id FROM executions
  WHERE execution_id = ? AND (retry_of <> '' OR mode <> '')

-- name: ExecutionReadRetries
SELECT execution_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at FROM executions WHERE retry_of = ? ORDER BY first_seen_at

-- name: ExecutionReadRetryOf
SELECT retry_of FROM executions WHERE execution_id = ?

-- name: ExecutionReadRoot
SELECT root_execution_id FROM executions WHERE execution_id = :id

-- name: ExecutionSupersede
UPDATE executions SET superseded_at = :now WHERE execution_id = :id AND superseded_at IS NULL

-- name: ExecutionUpsert
INSERT INTO executions (execution_id, n8n_id, incarnation, workflow_id, workflow_name, mode, retry_of,
  claimed_retry_of, root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at, started_at, checked_at,
  ended_at, n8n_status, hook_reports)
  VALUES (:id, :raw_id, :incarnation, :workflow_id, :workflow_name, :mode, :retry_of, :claimed_retry_of, :root, :url,
  :note, :now, :now, :started_at, :checked_at, :ended_at, :status, :hook)
  ON CONFLICT (execution_id) DO UPDATE SET
{{execution_merge}},
  n8n_url = CASE WHEN excluded.n8n_url <> '' THEN excluded.n8n_url ELSE executions.n8n_url END,
  root_execution_id = CASE WHEN executions.retry_of <> '' THEN executions.root_execution_id
  WHEN excluded.root_execution_id <> excluded.execution_id THEN excluded.root_execution_id
  ELSE executions.root_execution_id END,
  retry_of = CASE WHEN executions.retry_of = '' THEN excluded.retry_of ELSE executions.retry_of END,
  started_at = COALESCE(executions.started_at, excluded.started_at),
  checked_at = COALESCE(excluded.checked_at, executions.checked_at),
  ended_at = COALESCE(executions.ended_at, excluded.ended_at),
  n8n_status = CASE WHEN excluded.n8n_status <> '' THEN excluded.n8n_status ELSE executions.n8n_status END,
  hook_reports = executions.hook_reports + excluded.hook_reports
  RETURNING retry_of

-- name: ExecutionWorkflowOf
SELECT workflow_id FROM executions WHERE execution_id = ?
