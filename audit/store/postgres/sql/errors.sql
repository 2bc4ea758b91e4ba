-- n8n's errors (n8n_errors). PostgreSQL's statements and fragments where it
-- differs from SQLite (the rest are in ../../sql/, in the file of the same
-- name): row locks that skip what another session holds, batches as one
-- data-modifying statement, typed parameters.

-- A JSON array of error ids (:ids) or thread keys (:threads): a statement's
-- IN-list, an array the planner looks each up in an index by.
-- fragment: in_ids
= ANY(ARRAY(SELECT CAST(jsonb_array_elements_text(CAST(:ids AS jsonb)) AS bigint)))

-- fragment: in_threads
= ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:threads AS jsonb))))

-- Rows another session holds are skipped, never waited for.
-- fragment: skip_locked
FOR UPDATE SKIP LOCKED

-- A batch's errors recorded in one statement, each linked to its first
-- event (none: NULL). It returns those recorded: one fewer means another
-- session recorded its dedupe key since the batch read, and the batch
-- decides again (writeErrors).
-- name: ErrorBatchInsert
WITH error_rows AS (
  SELECT j->>'dedupe_key' AS dedupe_key, j->>'kind' AS kind, j->>'execution_id' AS execution_id,
  j->>'retry_of' AS retry_of, j->>'root_execution_id' AS root,
  j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode, j->>'node' AS node,
  j->>'message' AS message, j->>'http_code' AS http_code, j->>'n8n_url' AS url, j->>'payload' AS payload,
  CAST(j->>'payload_truncated' AS boolean) AS truncated, j->>'intake_note' AS note,
  NULLIF(j->>'source', '') AS source, NULLIF(j->>'event_id', '') AS event_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:errors AS jsonb)))) AS j
)
INSERT INTO n8n_errors (dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id, workflow_id,
  workflow_name, mode, node, message, http_code, n8n_url, payload, payload_truncated, intake_note, source, event_id)
  SELECT r.dedupe_key, CAST(:now AS timestamptz), r.kind, r.execution_id, r.retry_of, r.root, r.workflow_id,
  r.workflow_name, r.mode, r.node, r.message, r.http_code, r.url, r.payload, r.truncated, r.note, r.source, r.event_id
  FROM error_rows AS r
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING id, dedupe_key

-- name: ErrorPrune
DELETE FROM n8n_errors WHERE id {{in_ids}} AND source IS NULL
