-- The alerts' outbox (outbox), their Slack threads (slack_threads) and
-- each channel's pace (slack_channels).
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: OutboxBatchInsert
WITH r AS (SELECT j.value->>'$.thread_key' AS thread_key, j.value->>'$.kind' AS kind, j.value->>'$.source' AS source,
  j.value->>'$.event_id' AS event_id, j.value->>'$.error_id' AS error_id, j.value->>'$.payload' AS payload,
  j.value->>'$.state' AS state, j.value->>'$.last_error' AS last_error, j.value->>'$.alert_kind' AS alert_kind
  FROM json_each(:outbox) AS j)
INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state, last_error,
  alert_kind)
  SELECT :now, :now, thread_key, kind, source, event_id, error_id, payload, state, last_error, alert_kind FROM r

-- name: OutboxBatchOpenThreads
WITH v AS (SELECT j.value->>'$.thread' AS thread FROM json_each(:threads) AS j)
SELECT DISTINCT thread_key FROM outbox WHERE kind = 'alert' AND thread_key IN (SELECT thread FROM v)

-- SQLite: no FOR UPDATE SKIP LOCKED: SQLite has one writer, there is nothing to skip.
-- name: OutboxLease
WITH picked AS MATERIALIZED (SELECT o.id FROM outbox o
  WHERE (o.state = 'pending' OR (o.state = 'sending' AND o.lease_until < :now)) AND o.due_at <= :now
  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.thread_key = o.thread_key AND p.id < o.id
  AND p.state IN ('pending', 'sending'))
  ORDER BY o.id LIMIT :limit)
{{outbox_lease_update}}
