-- The ledger's entries: webhook_events (an event) and event_items (an item
-- of a multi-item event); the claim and outcome batches' writes.
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- name: EventAttachError
UPDATE webhook_events SET last_seen_at = last_seen_at
  WHERE source = :source AND event_id = :event_id
  RETURNING status, holder_execution_id, item_count, updated_at, deliveries, crm_ref

-- name: EventContradict
UPDATE webhook_events SET status = 'processing', review_reason = 'contradiction', updated_at = :now,
  last_seen_at = :now, stale_alerted_at = NULL, crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item_count = 0 AND status = 'failed'
  AND holder_execution_id = :reporter
  RETURNING status, holder_execution_id, item_count, review_reason

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
DELETE FROM webhook_events WHERE source IN (:sources)

-- name: EventDetectStale
UPDATE webhook_events SET stale_alerted_at = :now
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND updated_at < :cutoff
  AND holder_execution_id = :holder AND review_reason = ''
  AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
  RETURNING status, holder_execution_id, item_count

-- name: EventFindStale
SELECT source, event_id, holder_execution_id
  FROM webhook_events
  WHERE status = 'processing' AND review_reason = '' AND updated_at < ?
  AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
  ORDER BY updated_at LIMIT 100

-- The event's row of a claim with items, made: returned as
-- EventBatchCapture returns an entry.
-- name: EventInsertWithItems
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, item_count,
  created_at, updated_at, last_seen_at)
  VALUES (:source, :event_id, 'processing', :holder, 1, :now, :now, :now)
  ON CONFLICT (source, event_id) DO NOTHING
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, false AS presented

-- name: EventKeepEvidence
UPDATE webhook_events SET review_reason = 'not_holder'
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND review_reason = ''

-- name: EventList
SELECT source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
  deliveries, item_count, fingerprint, crm_ref, review_reason, stale_alerted_at,
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

-- name: EventLock
UPDATE webhook_events SET last_seen_at = :now
  WHERE source = :source AND event_id = :event_id
  RETURNING item_count

-- The event's row of a claim with items, locked: returned as
-- EventBatchCapture returns an entry, with whether the claiming execution
-- (:holder) presented the key before.
-- name: EventLockWithItems
UPDATE webhook_events SET last_seen_at = :now
  WHERE source = :source AND event_id = :event_id
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries,
  EXISTS (SELECT 1 FROM event_executions AS x WHERE x.source = :source AND x.event_id = :event_id
  AND x.execution_id = :holder AND x.role = 'claim') AS presented

-- name: EventOtherHolder
SELECT w.holder_execution_id FROM webhook_events w
  WHERE w.source = :source AND w.event_id = :event_id AND w.status IN (:statuses) AND w.item_count = 0
  AND w.holder_execution_id <> '' AND w.holder_execution_id <> :caller

-- name: EventPrune
DELETE FROM webhook_events WHERE source = :source AND event_id = :event_id
  AND status = 'done' AND last_seen_at < :before

-- name: EventRead
SELECT source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
  deliveries, item_count, fingerprint, crm_ref, review_reason, stale_alerted_at,
  CASE WHEN status = 'processing' AND (review_reason <> '' OR updated_at < ?) THEN 1 ELSE 0 END AS needs_review
  FROM webhook_events WHERE source = ? AND event_id = ?

-- name: EventReadFinished
SELECT status, holder_execution_id, item_count, review_reason FROM webhook_events
  WHERE source = :source AND event_id = :event_id

-- name: EventReadState
SELECT status, updated_at, deliveries, crm_ref
  FROM webhook_events WHERE source = ? AND event_id = ?

-- name: EventResolve
UPDATE webhook_events SET status = :status, updated_at = :now, last_seen_at = :now, review_reason = '',
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item_count = 0 AND status = 'processing'
  AND holder_execution_id = :holder AND (:confirmed OR review_reason <> '' OR updated_at < :cutoff)
  RETURNING status, holder_execution_id, item_count, review_reason

-- name: EventReviewContradiction
UPDATE webhook_events SET review_reason = 'contradiction'
  WHERE source = :source AND event_id = :event_id AND status = 'processing'

-- name: EventReviewNotHolder
UPDATE webhook_events SET review_reason = 'not_holder'
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND review_reason = ''

-- name: EventReviewUnknown
UPDATE webhook_events SET review_reason = 'unknown'
  WHERE source = :source AND event_id = :event_id AND status = 'processing'

-- name: EventRollUp
UPDATE webhook_events SET status = :status, item_count = :count,
  updated_at = CASE WHEN status <> :status THEN :now ELSE updated_at END,
  review_reason = CASE WHEN :status <> 'processing' THEN '' ELSE review_reason END,
  holder_execution_id = CASE WHEN :holder <> '' THEN :holder ELSE holder_execution_id END
  WHERE source = :source AND event_id = :event_id
  RETURNING status, holder_execution_id, item_count

-- name: EventTouchReported
UPDATE webhook_events SET last_seen_at = :now
  WHERE source = :source AND event_id = :event_id
  RETURNING item_count

-- name: ItemContradict
UPDATE event_items SET status = 'processing', review_reason = 'contradiction', updated_at = :now,
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'failed'
  AND holder_execution_id = :reporter
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason

-- name: ItemCount
SELECT status, count(*) AS n FROM event_items WHERE source = ? AND event_id = ? GROUP BY status

-- name: ItemFinish
UPDATE event_items SET status = :status, holder_execution_id = :reporter, updated_at = :now,
  review_reason = '', crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item
  AND (holder_execution_id IN (:chain) OR holder_execution_id = '')
  AND (status = 'processing' OR (status = 'failed' AND holder_execution_id <> :reporter))
  AND review_reason <> 'contradiction'
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason

-- name: ItemHold
UPDATE event_items SET holder_execution_id = :holder,
  updated_at = CASE WHEN holder_execution_id = :holder THEN updated_at ELSE :now END,
  review_reason = CASE WHEN holder_execution_id = :holder THEN review_reason ELSE '' END
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
  AND holder_execution_id IN (:chain)
  RETURNING status, holder_execution_id, 0 AS item_count

-- name: ItemHoldsAny
SELECT EXISTS (SELECT 1 FROM event_items
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND holder_execution_id IN (:chain))

-- name: ItemInsert
INSERT INTO event_items (source, event_id, item, status, holder_execution_id, created_at, updated_at)
  VALUES (:source, :event_id, :item, 'processing', :holder, :now, :now)
  ON CONFLICT (source, event_id, item) DO NOTHING
  RETURNING status, holder_execution_id, 0 AS item_count

-- name: ItemKeepEvidence
UPDATE event_items SET review_reason = 'not_holder'
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
  AND review_reason = ''

-- name: ItemList
SELECT item, status, holder_execution_id, crm_ref,
  review_reason, created_at, updated_at FROM event_items WHERE source = ? AND event_id = ? ORDER BY item

-- name: ItemOtherHolder
SELECT i.holder_execution_id FROM event_items i
  WHERE i.source = :source AND i.event_id = :event_id AND i.item IN (:items) AND i.status IN (:statuses)
  AND i.holder_execution_id <> '' AND i.holder_execution_id <> :caller
  ORDER BY i.updated_at DESC LIMIT 1

-- name: ItemRead
SELECT status, holder_execution_id, 0 AS item_count FROM event_items
  WHERE source = :source AND event_id = :event_id AND item = :item

-- name: ItemReadFinished
SELECT status, holder_execution_id, 1 AS item_count, review_reason FROM event_items
  WHERE source = :source AND event_id = :event_id AND item = :item

-- name: ItemReclaim
UPDATE event_items SET status = 'processing', holder_execution_id = :holder, updated_at = :now,
  review_reason = ''
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'failed'
  RETURNING status, holder_execution_id, 0 AS item_count

-- name: ItemResolve
UPDATE event_items SET status = :status, updated_at = :now, review_reason = '',
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
  AND holder_execution_id = :holder AND (:confirmed OR review_reason <> '' OR updated_at < :cutoff)
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason

-- name: ItemUnknown
UPDATE event_items SET status = 'processing', holder_execution_id = :reporter,
  updated_at = CASE WHEN status = 'processing' THEN updated_at ELSE :now END, review_reason = 'unknown',
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item
  AND (holder_execution_id IN (:chain) OR holder_execution_id = '')
  AND ((status = 'processing' AND (review_reason <> 'unknown' OR holder_execution_id <> :reporter))
  OR (status = 'failed' AND holder_execution_id <> :reporter))
  AND review_reason <> 'contradiction'
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason
