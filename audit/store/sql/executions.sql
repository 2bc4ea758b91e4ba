-- n8n's executions (executions) and which entries each touched
-- (event_executions). The format of these files: catalogue.go.

-- name: EventExecutionCount
SELECT count(*) FROM event_executions WHERE source = :source AND event_id = :event_id

-- name: EventExecutionList
SELECT x.execution_id, x.n8n_id, x.incarnation, x.workflow_id, x.workflow_name, x.mode, x.retry_of,
  x.claimed_retry_of, x.root_execution_id, x.n8n_url, x.lineage_note, x.run_stamp, x.started_at, x.ended_at,
  x.checked_at, x.n8n_status, x.first_seen_at, x.last_seen_at, x.superseded_at,
  ee.source AS "p.source", ee.event_id AS "p.event_id", ee.execution_id AS "p.execution_id", ee.role AS "p.role",
  ee.delivery AS "p.delivery", ee.acted AS "p.acted", ee.delivery_id AS "p.delivery_id",
  ee.workflow_id AS "p.workflow_id", ee.class AS "p.class", ee.first_seen_at AS "p.first_seen_at"
  FROM event_executions ee JOIN executions x ON x.execution_id = ee.execution_id
  WHERE ee.source = :source AND ee.event_id = :event_id ORDER BY ee.first_seen_at, x.execution_id LIMIT :limit

-- name: EventExecutionReadTouched
SELECT source, event_id, role, delivery, first_seen_at FROM event_executions
  WHERE execution_id = :execution_id ORDER BY first_seen_at

-- name: ExecutionDeleteScratch
DELETE FROM executions WHERE execution_id LIKE :executions

-- name: ExecutionPrune
DELETE FROM executions WHERE execution_id IN (
  SELECT x.execution_id FROM executions x WHERE x.last_seen_at < :before
  AND NOT EXISTS (SELECT 1 FROM event_executions e WHERE e.execution_id = x.execution_id)
  AND NOT EXISTS (SELECT 1 FROM n8n_errors r WHERE r.execution_id = x.execution_id)
  AND NOT EXISTS (SELECT 1 FROM executions c WHERE c.retry_of = x.execution_id)
  LIMIT :batch)

-- fragment: execution_columns
execution_id, n8n_id, incarnation, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, run_stamp, started_at, ended_at, checked_at, n8n_status,
  first_seen_at, last_seen_at, superseded_at

-- name: ExecutionRead
SELECT {{execution_columns}} FROM executions WHERE execution_id = :execution_id

-- The executions that retry :execution_id.
-- name: ExecutionReadRetries
SELECT {{execution_columns}} FROM executions WHERE retry_of = :execution_id ORDER BY first_seen_at
