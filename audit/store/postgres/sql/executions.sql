-- n8n's executions (executions) and which entries each touched
-- (event_executions).
--
-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../../sql/, in the file of the same name): row locks that skip what
-- another session holds, batches as one data-modifying statement, typed
-- parameters. The files' format is ../../sql/'s.

-- The entries the executions of a round of error payloads touched, each
-- execution's in EventExecutionFindEvents' order, under their row lock (as EventAttachError
-- takes it): a claim that takes an entry over commits before or after the
-- round judges it, never between.
-- name: EventExecutionBatchEvents
WITH v AS (
  SELECT j->>'id' AS v_id FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
)
SELECT ee.execution_id, w.source, w.event_id, w.status, w.holder_execution_id, w.updated_at, w.deliveries, w.crm_ref
  FROM event_executions AS ee JOIN webhook_events AS w ON w.source = ee.source AND w.event_id = ee.event_id
  WHERE ee.execution_id IN (SELECT v_id FROM v)
  ORDER BY ee.execution_id, ee.first_seen_at, ee.source, ee.event_id
  FOR UPDATE OF w

-- PostgreSQL: empty: ClaimBatchWrite marks the deliveries acted on with the rest.
-- name: EventExecutionBatchMarkActed

-- PostgreSQL: empty: EventBatchCapture reads whether an execution presented
-- its key before, and ClaimBatchWrite records it.
-- name: EventExecutionBatchPresent

-- PostgreSQL: empty: ErrorBatchWrite records the executions with the rest.
-- name: EventExecutionBatchRecordErrors

-- PostgreSQL: empty: OutcomeBatchWrite records the reporters with the rest.
-- name: EventExecutionBatchReporters

-- The executions of a round of error payloads, each known as itself and
-- with no lineage, seen again: a payload's fields fill in what it says, as
-- ExecutionUpsert does for a row it finds. It returns them as ExecutionRead
-- does; one superseded, or given a retry_of, since the batch read it is not
-- the one its payloads were judged against: they go one by one.
-- name: ExecutionBatchErrorSeen
WITH r AS (
  SELECT j->>'id' AS id, j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode,
  j->>'url' AS url
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
)
UPDATE executions AS x SET workflow_id = CASE WHEN r.workflow_id <> '' THEN r.workflow_id ELSE x.workflow_id END,
  workflow_name = CASE WHEN r.workflow_name <> '' THEN r.workflow_name ELSE x.workflow_name END,
  mode = CASE WHEN r.mode <> '' THEN r.mode ELSE x.mode END,
  n8n_url = CASE WHEN r.url <> '' THEN r.url ELSE x.n8n_url END,
  last_seen_at = CAST(:now AS timestamptz)
  FROM r WHERE x.execution_id = r.id AND x.superseded_at IS NULL
  RETURNING x.execution_id, x.workflow_id, x.workflow_name, x.mode, x.retry_of, x.claimed_retry_of,
  x.root_execution_id, x.n8n_url, x.lineage_note, x.first_seen_at, x.last_seen_at

-- name: ExecutionBatchRead
WITH v AS (SELECT j->>'id' AS id FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j)
SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, mode, n8n_status, first_seen_at, last_seen_at,
  started_at, ended_at, checked_at FROM executions WHERE n8n_id IN (SELECT id FROM v) AND superseded_at IS NULL

-- PostgreSQL: empty: EventBatchLock reads the executions with the lock.
-- name: ExecutionBatchReadKnown

-- PostgreSQL: empty: OutcomeBatchWrite writes the executions seen with the rest.
-- name: ExecutionBatchSeen

-- PostgreSQL: empty: ClaimBatchWrite writes the executions with the rest.
-- name: ExecutionBatchUpsert
