-- n8n's errors (n8n_errors), as the Error Trigger, the hooks and the
-- reconciler report them.
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ErrorBatchInsert
WITH r AS (SELECT j.value->>'$.dedupe_key' AS dedupe_key, j.value->>'$.kind' AS kind,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.retry_of' AS retry_of, j.value->>'$.root' AS root,
  j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.mode' AS mode, j.value->>'$.node' AS node,
  j.value->>'$.message' AS message, j.value->>'$.http_code' AS http_code, j.value->>'$.url' AS url,
  j.value->>'$.payload' AS payload, j.value->>'$.truncated' AS truncated, j.value->>'$.note' AS note,
  NULLIF(j.value->>'$.source', '') AS source, NULLIF(j.value->>'$.event_id', '') AS event_id FROM json_each(:errors) AS j)
INSERT INTO n8n_errors (dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id, workflow_id,
  workflow_name, mode, node, message, http_code, n8n_url, payload, payload_truncated, intake_note, source, event_id)
  SELECT dedupe_key, :now, kind, execution_id, retry_of, root, workflow_id, workflow_name, mode, node, message,
  http_code, url, payload, truncated, note, source, event_id FROM r WHERE true
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING id, dedupe_key

-- SQLite: +source and INDEXED BY keep the planner off the event index: it read every unlinked error.
-- name: ErrorBatchPending
WITH v AS (SELECT j.value->>'$.id' AS id FROM json_each(:executions) AS j)
SELECT execution_id, root_execution_id FROM n8n_errors WHERE +source IS NULL
  AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
  AND execution_id <> '' AND execution_id IN (SELECT id FROM v)
UNION
SELECT execution_id, root_execution_id FROM n8n_errors INDEXED BY n8n_errors_unlinked_root WHERE source IS NULL
  AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
  AND root_execution_id IN (SELECT id FROM v)

-- SQLite: empty: no data-modifying WITH; EventExecutionBatchRecordErrors,
-- HistoryBatchInsertErrors, EventBatchMarkErrors, OutboxBatchInsert and
-- StatsBatchAdd write what errors write on their entries one table at a
-- time (PostgreSQL writes it in one).
-- name: ErrorBatchWrite

-- SQLite: no FOR UPDATE SKIP LOCKED: SQLite has one writer, there is nothing to skip.
-- name: ErrorFindUnlinked
SELECT id FROM n8n_errors WHERE source IS NULL AND received_at < ?
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id)
  ORDER BY id LIMIT ?
