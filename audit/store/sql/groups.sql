-- Alert groups (alert_groups): errors of one kind, workflow and node.
-- The format of these files: catalogue.go.

-- The errors of an alert group: kind, workflow and node, linked to no
-- event, received in the group's window (:from, :until); how many, and the
-- first and the last (one row when they are one).
-- name: GroupErrors
WITH g AS (SELECT id FROM n8n_errors WHERE kind = :kind AND workflow_id = :workflow_id AND node = :node
  AND source IS NULL AND received_at >= :from AND received_at < :until)
SELECT (SELECT count(*) FROM g) AS n, {{error_columns}} FROM n8n_errors
  WHERE id = (SELECT min(id) FROM g) OR id = (SELECT max(id) FROM g) ORDER BY id

-- name: GroupJoin
INSERT INTO alert_groups (group_key, kind, workflow_id, node, thread_key, opened_at, closes_at)
  VALUES (:key, :kind, :workflow_id, :node, :thread, :now, :closes)
  ON CONFLICT (group_key) DO UPDATE SET thread_key = excluded.thread_key, opened_at = excluded.opened_at,
  closes_at = excluded.closes_at, reply_due_at = NULL
  WHERE alert_groups.closes_at <= :now
  RETURNING thread_key

-- name: GroupPrune
DELETE FROM alert_groups WHERE group_key IN (
  SELECT group_key FROM alert_groups WHERE closes_at < :before LIMIT :batch)

-- name: GroupRead
SELECT group_key, kind, workflow_id, node, thread_key, opened_at, closes_at, reply_due_at
  FROM alert_groups WHERE group_key = :key

-- name: GroupSpaceReplies
UPDATE alert_groups SET reply_due_at = :due WHERE group_key = :key
