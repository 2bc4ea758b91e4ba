-- The ledger's entries: webhook_events (an event) and event_items (an item
-- of a multi-item event). The format of these files: catalogue.go.

-- name: EventCount
SELECT status, count(*) AS n FROM webhook_events GROUP BY status

-- name: EventCountInReview
SELECT count(*) FROM webhook_events
  WHERE status = 'processing' AND (review_reason <> '' OR updated_at < :cutoff)

-- name: EventCountInReviewByWorkflow
SELECT w.source, COALESCE(x.workflow_id, '') AS workflow_id, count(*) AS n
  FROM webhook_events w LEFT JOIN executions x ON x.execution_id = w.holder_execution_id
  WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < :cutoff)
  AND (:source = '' OR w.source = :source)
  GROUP BY w.source, COALESCE(x.workflow_id, '')

-- name: EventDeleteScratch
DELETE FROM webhook_events WHERE source IN (:source, :other)

-- name: EventFindDone
SELECT source, event_id FROM webhook_events
  WHERE status = 'done' AND last_seen_at < :before ORDER BY last_seen_at LIMIT :batch {{skip_locked}}

-- name: EventFindStale
SELECT source, event_id, holder_execution_id FROM webhook_events
  WHERE status = 'processing' AND review_reason = '' AND updated_at < :cutoff
  AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
  ORDER BY updated_at LIMIT 100

-- fragment: event_columns
source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
  deliveries, item_count, fingerprint, crm_ref, review_reason, review_since, stale_alerted_at, version,
  resolved_by, alerted, first_workflow_id, last_delivery_id, last_presented_at,
  CASE WHEN status = 'processing' AND (review_reason <> '' OR updated_at < :cutoff) THEN 1 ELSE 0 END AS needs_review

-- The page after the cursor (:at, :after_source, :after_id), filtered:
-- an empty filter, or 0, is no filter.
-- name: EventList
SELECT {{event_columns}} FROM webhook_events
  WHERE (last_seen_at, source, event_id) < (:at, :after_source, :after_id)
  AND (:source = '' OR source = :source) AND (:status = '' OR status = :status)
  AND (:prefix = '' OR substr(event_id, 1, :prefix_len) = :prefix)
  AND (:instance = '' OR EXISTS (SELECT 1 FROM event_executions x
  WHERE x.source = webhook_events.source AND x.event_id = webhook_events.event_id
  AND CASE WHEN :instance = 'default' THEN x.execution_id NOT LIKE '%@%' ELSE x.execution_id LIKE :instance_like END))
  AND updated_at < :older_than
  AND (:review = 0 OR (status = 'processing' AND (review_reason <> '' OR updated_at < :cutoff)))
  ORDER BY last_seen_at DESC, source DESC, event_id DESC LIMIT :limit

-- name: EventPrune
DELETE FROM webhook_events WHERE source = :source AND event_id = :event_id
  AND status = 'done' AND last_seen_at < :before

-- name: EventRead
SELECT {{event_columns}} FROM webhook_events WHERE source = :source AND event_id = :event_id

-- name: ItemList
SELECT source, event_id, item, status, holder_execution_id, crm_ref, review_reason, review_since, created_at,
  updated_at, version, resolved_by FROM event_items WHERE source = :source AND event_id = :event_id ORDER BY item
