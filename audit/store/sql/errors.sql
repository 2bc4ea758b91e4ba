-- n8n's errors (n8n_errors), as the Error Trigger, the hooks and the
-- reconciler report them. The format of these files: catalogue.go.

-- name: ErrorCount
SELECT kind, count(*) AS n FROM n8n_errors GROUP BY kind

-- name: ErrorCountOfEvent
SELECT count(*) FROM n8n_errors WHERE source = :source AND event_id = :event_id

-- name: ErrorDeleteScratch
DELETE FROM n8n_errors WHERE execution_id LIKE :executions

-- name: ErrorDropPayloads
UPDATE n8n_errors SET payload = '', payload_dropped = true WHERE id IN (
  SELECT id FROM n8n_errors WHERE payload_dropped = false AND payload <> '' AND received_at < :before
  ORDER BY id LIMIT :batch)

-- name: ErrorFindUnlinked
SELECT id FROM n8n_errors WHERE source IS NULL AND received_at < :before
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id)
  ORDER BY id LIMIT :batch {{skip_locked}}

-- name: ErrorKnown
SELECT EXISTS (SELECT 1 FROM n8n_errors WHERE dedupe_key = :dedupe_key)

-- fragment: error_columns
id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id, workflow_id, workflow_name,
  mode, node, message, http_code, n8n_url, payload_truncated, payload_dropped, intake_note, source, event_id

-- name: ErrorList
SELECT {{error_columns}} FROM n8n_errors
  WHERE id < :before AND ((:kind = '' AND kind <> 'test_payload') OR kind = :kind) ORDER BY id DESC LIMIT :limit

-- name: ErrorListOfEvent
SELECT {{error_columns}} FROM n8n_errors WHERE source = :source AND event_id = :event_id ORDER BY id LIMIT :limit

-- name: ErrorListOfExecution
SELECT {{error_columns}} FROM n8n_errors WHERE execution_id = :execution_id ORDER BY id

-- name: ErrorMerge
UPDATE n8n_errors SET retry_of = :retry_of,
  workflow_id = :workflow_id, workflow_name = :workflow_name, mode = :mode, node = :node,
  message = :message, http_code = :http_code, n8n_url = :url, payload = :payload,
  payload_truncated = :truncated WHERE id = :id

-- name: ErrorPruneOfEvent
DELETE FROM n8n_errors WHERE source = :source AND event_id = :event_id
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id
  AND NOT (h.source = :source AND h.event_id = :event_id))

-- name: ErrorRead
SELECT {{error_columns}}, payload FROM n8n_errors WHERE id = :id

-- name: ErrorRelinkOfEvent
UPDATE n8n_errors SET (source, event_id) = (SELECT h.source, h.event_id
  FROM event_history h WHERE h.error_id = n8n_errors.id AND NOT (h.source = :source AND h.event_id = :event_id)
  ORDER BY h.id LIMIT 1)
  WHERE source = :source AND event_id = :event_id
