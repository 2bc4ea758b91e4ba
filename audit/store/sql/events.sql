-- The ledger's entries: webhook_events (an event) and event_items (an item
-- of a multi-item event); the claim and outcome batches' writes.
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- name: EventCount
SELECT status, count(*) AS n FROM webhook_events GROUP BY status

-- name: EventCountInReview
SELECT count(*) FROM webhook_events
  WHERE status = 'processing' AND (review_reason <> '' OR updated_at < ?)

-- name: EventCountInReviewByWorkflow
SELECT w.source,
  COALESCE(x.workflow_id, '') AS workflow_id, count(*) AS n
  FROM webhook_events w LEFT JOIN executions x ON x.execution_id = w.holder_execution_id
  WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < ?) AND (? = '' OR w.source = ?)
  GROUP BY w.source, COALESCE(x.workflow_id, '')

-- name: EventDeleteScratch
DELETE FROM webhook_events WHERE source IN (:source, :other)

-- name: EventFindStale
SELECT source, event_id, holder_execution_id
  FROM webhook_events
  WHERE status = 'processing' AND review_reason = '' AND updated_at < ?
  AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
  ORDER BY updated_at LIMIT 100

-- name: EventList
SELECT source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
  deliveries, item_count, fingerprint, crm_ref, review_reason, stale_alerted_at, version, resolved_by,
  CASE WHEN status = 'processing' AND (review_reason <> '' OR updated_at < ?) THEN 1 ELSE 0 END AS needs_review
  FROM webhook_events
  WHERE (last_seen_at, source, event_id) < (?, ?, ?)
  AND (? = '' OR source = ?) AND (? = '' OR status = ?)
  AND (? = '' OR substr(event_id, 1, ?) = ?)
  AND (? = '' OR EXISTS (SELECT 1 FROM event_executions x
  WHERE x.source = webhook_events.source AND x.event_id = webhook_events.event_id
  AND CASE WHEN ? = 'default' THEN x.execution_id NOT LIKE '%@%' ELSE x.execution_id LIKE ? END))
  AND updated_at < ?
  AND (? = 0 OR (status = 'processing' AND (review_reason <> '' OR updated_at < ?)))
  ORDER BY last_seen_at DESC, source DESC, event_id DESC LIMIT ?

-- name: EventPrune
DELETE FROM webhook_events WHERE source = :source AND event_id = :event_id
  AND status = 'done' AND last_seen_at < :before

-- name: EventRead
SELECT source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
  deliveries, item_count, fingerprint, crm_ref, review_reason, stale_alerted_at, version, resolved_by,
  CASE WHEN status = 'processing' AND (review_reason <> '' OR updated_at < ?) THEN 1 ELSE 0 END AS needs_review
  FROM webhook_events WHERE source = ? AND event_id = ?

-- name: EventReadState
SELECT status, updated_at, deliveries, crm_ref
  FROM webhook_events WHERE source = ? AND event_id = ?

-- name: ItemList
SELECT item, status, holder_execution_id, crm_ref,
  review_reason, created_at, updated_at, version, resolved_by FROM event_items WHERE source = ? AND event_id = ? ORDER BY item