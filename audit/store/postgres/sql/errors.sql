-- n8n's errors (n8n_errors), as the Error Trigger, the hooks and the
-- reconciler report them.
--
-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../../sql/, in the file of the same name): row locks that skip what
-- another session holds, batches as one data-modifying statement, typed
-- parameters. The files' format is ../../sql/'s.

-- Errors recorded in one statement, each linked to its first event (none:
-- NULL), the round's payloads or a payload recorded alone. It returns those
-- recorded now: a dedupe key already recorded makes a duplicate, which
-- ErrorBatchWrite then writes nothing for.
-- name: ErrorBatchInsert
WITH error_rows AS (
  SELECT j->>'dedupe_key' AS dedupe_key, j->>'kind' AS kind, j->>'execution_id' AS execution_id,
  j->>'retry_of' AS retry_of, j->>'root' AS root,
  j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode, j->>'node' AS node,
  j->>'message' AS message, j->>'http_code' AS http_code, j->>'url' AS url, j->>'payload' AS payload,
  CAST(j->>'truncated' AS boolean) AS truncated, j->>'note' AS note,
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

-- PostgreSQL: empty: ClaimBatchWrite returns the errors waiting for the
-- round's executions.
-- name: ErrorBatchPending

-- What errors recorded (ErrorBatchInsert), or linked once their claim came,
-- write on the entries they are linked to, in one statement: the
-- executions made part of the events, the history lines, the review of the
-- entries the errors' executions hold, the alerts and their counters.
-- name: ErrorBatchWrite
WITH role_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:roles AS jsonb)))) AS j
), history_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id,
  j->>'retry_of' AS retry_of, j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name,
  j->>'node' AS node, j->>'decision' AS decision, j->>'message' AS message, CAST(j->>'error_id' AS bigint) AS error_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:history AS jsonb)))) AS j
), review_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'holder' AS holder
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:reviews AS jsonb)))) AS j
), roles AS (
  INSERT INTO event_executions (source, event_id, execution_id, role, first_seen_at)
  SELECT r.source, r.event_id, r.execution_id, 'error', CAST(:now AS timestamptz) FROM role_rows AS r
  ON CONFLICT (source, event_id, execution_id) DO NOTHING
  RETURNING 1
), history AS (
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  SELECT r.source, r.event_id, '', CAST(:now AS timestamptz), 'error', r.execution_id, r.retry_of, r.workflow_id,
  r.workflow_name, r.node, r.decision, '', '', '', '', r.message, '', r.error_id
  FROM history_rows AS r
  RETURNING 1
), reviews AS (
  UPDATE webhook_events AS w SET review_reason = 'error', last_seen_at = CAST(:now AS timestamptz)
  FROM review_rows AS r
  WHERE w.source = r.source AND w.event_id = r.event_id AND w.status = 'processing'
  AND w.holder_execution_id = r.holder AND w.review_reason = ''
  RETURNING 1
), outbox_rows AS (
  SELECT j->>'thread_key' AS thread_key, j->>'kind' AS kind, j->>'source' AS source, j->>'event_id' AS event_id,
  CAST(j->>'error_id' AS bigint) AS error_id, j->>'payload' AS payload, j->>'state' AS state,
  j->>'last_error' AS last_error, j->>'alert_kind' AS alert_kind
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:outbox AS jsonb)))) AS j
), outbox AS (
  INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state, last_error,
  alert_kind)
  SELECT CAST(:now AS timestamptz), CAST(:now AS timestamptz), r.thread_key, r.kind, r.source, r.event_id, r.error_id,
  r.payload, r.state, r.last_error, r.alert_kind
  FROM outbox_rows AS r
  RETURNING 1
), {{counters}}
SELECT 1

-- name: ErrorFindUnlinked
SELECT id FROM n8n_errors WHERE source IS NULL AND received_at < ?
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id)
  ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED
