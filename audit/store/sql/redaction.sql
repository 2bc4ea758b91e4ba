-- Reading and rewriting the stored n8n text that the redaction rules cover
-- (Store.RedactStored), a pair a table. The format of these files:
-- catalogue.go.

-- RedactStored walks the tables that hold text from n8n, 200 rows at a
-- time, and writes back what today's rules redact (a NULL: unchanged). Keys
-- compare as numbers for ids and as text for executions and groups.
-- name: RedactReadAlertGroups
SELECT group_key AS k, node FROM alert_groups WHERE group_key > :after ORDER BY group_key LIMIT 200

-- Only the messages of these kinds are n8n's.
-- name: RedactReadEventHistory
SELECT id AS k, CASE WHEN kind IN ('error', 'outcome', 'not_holder') THEN message ELSE '' END AS message,
  workflow_name, node FROM event_history WHERE id > CAST(:after AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadExecutions
SELECT execution_id AS k, n8n_url, workflow_name FROM executions
  WHERE execution_id > :after ORDER BY execution_id LIMIT 200

-- name: RedactReadN8nErrors
SELECT id AS k, message, n8n_url, payload, workflow_name, node FROM n8n_errors
  WHERE id > CAST(:after AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadOutbox
SELECT id AS k, payload FROM outbox WHERE id > CAST(:after AS BIGINT) ORDER BY id LIMIT 200

-- The group's key is a hash of the node's name as it was: an open group
-- keeps its thread, the next error opens a new one.
-- name: RedactWriteAlertGroups
UPDATE alert_groups SET node = COALESCE(:node, node) WHERE group_key = :k

-- name: RedactWriteEventHistory
UPDATE event_history SET message = COALESCE(:message, message),
  workflow_name = COALESCE(:workflow_name, workflow_name), node = COALESCE(:node, node) WHERE id = CAST(:k AS BIGINT)

-- name: RedactWriteExecutions
UPDATE executions SET n8n_url = COALESCE(:n8n_url, n8n_url), workflow_name = COALESCE(:workflow_name, workflow_name)
  WHERE execution_id = :k

-- name: RedactWriteN8nErrors
UPDATE n8n_errors SET message = COALESCE(:message, message), n8n_url = COALESCE(:n8n_url, n8n_url),
  payload = COALESCE(:payload, payload), workflow_name = COALESCE(:workflow_name, workflow_name),
  node = COALESCE(:node, node) WHERE id = CAST(:k AS BIGINT)

-- name: RedactWriteOutbox
UPDATE outbox SET payload = COALESCE(:payload, payload) WHERE id = CAST(:k AS BIGINT)
