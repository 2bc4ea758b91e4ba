-- n8n's errors (n8n_errors), as the Error Trigger, the hooks and the
-- reconciler report them.
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- name: ErrorCount
SELECT kind, count(*) AS n FROM n8n_errors GROUP BY kind

-- name: ErrorCountOfEvent
SELECT count(*) FROM n8n_errors WHERE source = ? AND event_id = ?

-- name: ErrorDeleteScratch
DELETE FROM n8n_errors WHERE execution_id LIKE :executions

-- name: ErrorDropPayloads
UPDATE n8n_errors SET payload = '', payload_dropped = true WHERE id IN (
  SELECT id FROM n8n_errors WHERE payload_dropped = false AND payload <> '' AND received_at < :before
  ORDER BY id LIMIT :batch)

-- name: ErrorKnown
SELECT EXISTS (SELECT 1 FROM n8n_errors WHERE dedupe_key = ?)

-- name: ErrorList
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors
  WHERE id < ? AND ((? = '' AND kind <> 'test_payload') OR kind = ?)
  ORDER BY id DESC LIMIT ?

-- name: ErrorListOfEvent
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors WHERE source = ? AND event_id = ? ORDER BY id LIMIT ?

-- name: ErrorListOfExecution
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors WHERE execution_id = ? ORDER BY id

-- name: ErrorMerge
UPDATE n8n_errors SET retry_of = :retry_of,
  workflow_id = :workflow_id, workflow_name = :workflow_name, mode = :mode, node = :node,
  message = :message, http_code = :http_code, n8n_url = :url, payload = :payload,
  payload_truncated = :truncated WHERE id = :id

-- name: ErrorPrune
DELETE FROM n8n_errors WHERE id IN (?) AND source IS NULL

-- name: ErrorPruneOfEvent
DELETE FROM n8n_errors WHERE source = :source AND event_id = :event_id
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id
  AND NOT (h.source = :source AND h.event_id = :event_id))

-- name: ErrorRead
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id, payload FROM n8n_errors WHERE id = ?

-- name: ErrorRelinkOfEvent
UPDATE n8n_errors SET (source, event_id) = (SELECT h.source, h.event_id
  FROM event_history h WHERE h.error_id = n8n_errors.id AND NOT (h.source = :source AND h.event_id = :event_id)
  ORDER BY h.id LIMIT 1)
  WHERE source = :source AND event_id = :event_id
