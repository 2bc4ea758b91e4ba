-- Each entry's history (event_history).
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- name: HistoryCount
SELECT kind, count(*) AS n FROM event_history
  WHERE source = ? AND event_id = ? GROUP BY kind

-- name: HistoryReadLastSettlement
SELECT id, source, event_id, item, at, kind, execution_id,
  retry_of, workflow_id, workflow_name, node, decision, delivery, status, actor, message, error_id
  FROM event_history WHERE source = ? AND event_id = ? AND kind IN ('outcome', 'resolution')
  ORDER BY id DESC LIMIT 1

-- name: HistoryReadPage
SELECT id, source, event_id, item, at, kind, execution_id, retry_of, workflow_id,
  workflow_name, node, decision, delivery, class, status, actor, message, crm_ref, error_id, version FROM event_history WHERE source = ? AND event_id = ? AND id < ? ORDER BY id DESC LIMIT ?

-- name: HistoryReadRefusedReports
SELECT id, source, event_id, item, at, kind, execution_id, retry_of, workflow_id,
  workflow_name, node, decision, delivery, class, status, actor, message, crm_ref, error_id, version FROM event_history WHERE source = ? AND event_id = ? AND kind = ? ORDER BY id DESC LIMIT 20

-- name: HistoryReadReviewQueue
SELECT w.source, w.event_id, w.status,
  w.created_at, w.updated_at, w.last_seen_at, w.holder_execution_id, w.deliveries, w.item_count, w.fingerprint,
  w.crm_ref, w.review_reason, w.stale_alerted_at, w.version, w.resolved_by, 1 AS needs_review,
  COALESCE((SELECT h.message FROM event_history h WHERE h.source = w.source AND h.event_id = w.event_id
  AND h.kind IN ('error', 'outcome', 'stale', 'not_holder') ORDER BY h.id DESC LIMIT 1), '') AS last_news
  FROM webhook_events w
  WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < ?)
  ORDER BY w.updated_at, w.source, w.event_id LIMIT ?

-- name: HistoryReadReviewStart
SELECT at FROM event_history
  WHERE source = ? AND event_id = ? AND item = ? AND ((kind = 'outcome' AND decision = 'unknown') OR kind = 'error')
  ORDER BY id DESC LIMIT 1