-- Reading and rewriting the stored n8n text that the redaction rules cover
-- (Store.RedactStored), a pair a column.
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- name: RedactReadAlertGroupsNode
SELECT group_key AS k, node AS v FROM alert_groups WHERE group_key > ? ORDER BY group_key LIMIT 200

-- name: RedactReadEventHistoryMessage
SELECT id AS k, message AS v FROM event_history WHERE id > CAST(? AS BIGINT) AND kind IN ('error', 'outcome', 'not_holder') ORDER BY id LIMIT 200

-- name: RedactReadEventHistoryNode
SELECT id AS k, node AS v FROM event_history WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadEventHistoryWorkflowName
SELECT id AS k, workflow_name AS v FROM event_history WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadExecutionsN8nUrl
SELECT execution_id AS k, n8n_url AS v FROM executions WHERE execution_id > ? ORDER BY execution_id LIMIT 200

-- name: RedactReadExecutionsWorkflowName
SELECT execution_id AS k, workflow_name AS v FROM executions WHERE execution_id > ? ORDER BY execution_id LIMIT 200

-- RedactStored walks the columns that hold text from n8n, 200 rows at a
-- time, and writes back what today's rules redact. Keys compare as numbers
-- for ids and as text for executions and groups.
-- name: RedactReadN8nErrorsMessage
SELECT id AS k, message AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadN8nErrorsN8nUrl
SELECT id AS k, n8n_url AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadN8nErrorsNode
SELECT id AS k, node AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadN8nErrorsPayload
SELECT id AS k, payload AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadN8nErrorsWorkflowName
SELECT id AS k, workflow_name AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactReadOutboxPayload
SELECT id AS k, payload AS v FROM outbox WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactWriteAlertGroupsNode
UPDATE alert_groups SET node = ? WHERE group_key = ?

-- name: RedactWriteEventHistoryMessage
UPDATE event_history SET message = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteEventHistoryNode
UPDATE event_history SET node = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteEventHistoryWorkflowName
UPDATE event_history SET workflow_name = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteExecutionsN8nUrl
UPDATE executions SET n8n_url = ? WHERE execution_id = ?

-- name: RedactWriteExecutionsWorkflowName
UPDATE executions SET workflow_name = ? WHERE execution_id = ?

-- name: RedactWriteN8nErrorsMessage
UPDATE n8n_errors SET message = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteN8nErrorsN8nUrl
UPDATE n8n_errors SET n8n_url = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteN8nErrorsNode
UPDATE n8n_errors SET node = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteN8nErrorsPayload
UPDATE n8n_errors SET payload = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteN8nErrorsWorkflowName
UPDATE n8n_errors SET workflow_name = ? WHERE id = CAST(? AS BIGINT)

-- name: RedactWriteOutboxPayload
UPDATE outbox SET payload = ? WHERE id = CAST(? AS BIGINT)
