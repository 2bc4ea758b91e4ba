-- Alert groups (alert_groups): errors of one kind, workflow and node.
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- The errors of an alert group: kind, workflow and node, linked to no event,
-- received in the group's window.
-- name: GroupCount
SELECT count(*) FROM n8n_errors
  WHERE kind = ? AND workflow_id = ? AND node = ? AND source IS NULL AND received_at >= ? AND received_at < ?

-- name: GroupFirst
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors
  WHERE kind = ? AND workflow_id = ? AND node = ? AND source IS NULL AND received_at >= ? AND received_at < ?
  ORDER BY id LIMIT 1

-- name: GroupJoin
INSERT INTO alert_groups (group_key, kind,
  workflow_id, node, thread_key, opened_at, closes_at) VALUES (:key, :kind, :workflow_id, :node, :thread, :now, :closes)
  ON CONFLICT (group_key) DO UPDATE SET thread_key = excluded.thread_key, opened_at = excluded.opened_at,
  closes_at = excluded.closes_at, reply_due_at = NULL
  WHERE alert_groups.closes_at <= :now
  RETURNING thread_key

-- name: GroupLast
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors
  WHERE kind = ? AND workflow_id = ? AND node = ? AND source IS NULL AND received_at >= ? AND received_at < ?
  ORDER BY id DESC LIMIT 1

-- name: GroupPrune
DELETE FROM alert_groups WHERE group_key IN (
  SELECT group_key FROM alert_groups WHERE closes_at < :before LIMIT :batch)

-- name: GroupRead
SELECT group_key, kind, workflow_id, node, thread_key, opened_at,
  closes_at, reply_due_at FROM alert_groups WHERE group_key = ?

-- name: GroupSpaceReplies
UPDATE alert_groups SET reply_due_at = :due
  WHERE group_key = :key
