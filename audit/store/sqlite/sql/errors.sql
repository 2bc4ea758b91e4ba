-- n8n's errors (n8n_errors). SQLite's statements and fragments where it
-- differs from PostgreSQL (the rest are in ../../sql/, in the file of the
-- same name); each says where and why.

-- SQLite: a JSON array read with json_each, for PostgreSQL's = ANY(array).
-- fragment: in_ids
IN (SELECT value FROM json_each(:ids))

-- fragment: in_threads
IN (SELECT value FROM json_each(:threads))

-- SQLite: empty: it has one writer, there is nothing to skip.
-- fragment: skip_locked

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ErrorBatchInsert
WITH r AS (SELECT j.value->>'$.dedupe_key' AS dedupe_key, j.value->>'$.kind' AS kind,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.retry_of' AS retry_of, j.value->>'$.root_execution_id' AS root,
  j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.mode' AS mode, j.value->>'$.node' AS node,
  j.value->>'$.message' AS message, j.value->>'$.http_code' AS http_code, j.value->>'$.n8n_url' AS url,
  j.value->>'$.payload' AS payload, j.value->>'$.payload_truncated' AS truncated, j.value->>'$.intake_note' AS note,
  NULLIF(j.value->>'$.source', '') AS source, NULLIF(j.value->>'$.event_id', '') AS event_id FROM json_each(:errors) AS j)
INSERT INTO n8n_errors (dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id, workflow_id,
  workflow_name, mode, node, message, http_code, n8n_url, payload, payload_truncated, intake_note, source, event_id)
  SELECT dedupe_key, :now, kind, execution_id, retry_of, root, workflow_id, workflow_name, mode, node, message,
  http_code, url, payload, truncated, note, source, event_id FROM r WHERE true
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING id, dedupe_key

-- SQLite: +source, so that the ids are looked up, not every unlinked error
-- by the index of source.
-- name: ErrorPrune
DELETE FROM n8n_errors WHERE id {{in_ids}} AND +source IS NULL
