-- The ledger's entries: webhook_events (an event) and event_items (an item
-- of a multi-item event); the claim and outcome batches' writes.
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- A round's claims (:claims, a row set of source, event_id, execution_id,
-- chain and step) as the CTE v of the capture's steps (EventBatchInsert,
-- EventBatchReclaim, EventBatchHold, EventBatchTouch), each of which takes
-- the claims routed to it.
-- fragment: claim_rows
WITH v AS (
  SELECT j.value->>'$.source' AS v_source, j.value->>'$.event_id' AS v_event_id,
  j.value->>'$.execution_id' AS v_execution_id, j.value->>'$.step' AS v_step, j.value->'$.chain' AS v_chain
  FROM json_each(:claims) AS j
)

-- SQLite: empty: no data-modifying WITH; the statements below write a round
-- of claims one table at a time (PostgreSQL writes them in one).
-- name: ClaimBatchWrite

-- SQLite: empty: no data-modifying WITH; the four statements below
-- capture a round's entries one step at a time, each the claims routed to
-- it.
-- name: EventBatchCapture

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventBatchCountDeliveries
WITH r AS (SELECT j.value->>'$.source' AS r_source, j.value->>'$.event_id' AS r_event_id, j.value->>'$.new' AS r_new,
  j.value->>'$.fingerprint' AS r_fingerprint, j.value->>'$.workflow_id' AS r_workflow_id,
  j.value->>'$.delivery_id' AS r_delivery_id FROM json_each(:deliveries) AS j)
  UPDATE webhook_events SET deliveries = deliveries + r_new,
  fingerprint = CASE WHEN fingerprint = '' THEN r_fingerprint ELSE fingerprint END,
  first_workflow_id = CASE WHEN first_workflow_id = '' AND r_new THEN r_workflow_id ELSE first_workflow_id END,
  last_delivery_id = CASE WHEN r_new THEN r_delivery_id ELSE last_delivery_id END,
  last_presented_at = CASE WHEN r_new THEN :now ELSE last_presented_at END
  FROM r WHERE source = r_source AND event_id = r_event_id

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventBatchFinish
WITH r AS (SELECT j.value->>'$.source' AS r_source, j.value->>'$.event_id' AS r_event_id,
  j.value->>'$.status' AS r_status, j.value->>'$.reporter' AS r_reporter, j.value->'$.chain' AS r_chain,
  j.value->>'$.crm_ref' AS r_crm_ref
  FROM json_each(:reports) AS j)
UPDATE webhook_events SET status = CASE WHEN r_status = 'unknown' THEN 'processing' ELSE r_status END,
  holder_execution_id = r_reporter,
  updated_at = CASE WHEN r_status = 'unknown' AND status = 'processing' THEN updated_at ELSE :now END,
  last_seen_at = :now, review_reason = CASE WHEN r_status = 'unknown' THEN 'unknown' ELSE '' END,
  crm_ref = CASE WHEN r_crm_ref <> '' THEN r_crm_ref ELSE crm_ref END
  FROM r WHERE source = r_source AND event_id = r_event_id AND item_count = 0
  AND (holder_execution_id IN (SELECT value FROM json_each(r_chain)) OR holder_execution_id = '')
  AND (+status = 'processing' AND (r_status <> 'unknown' OR review_reason <> 'unknown'
  OR holder_execution_id <> r_reporter) OR (status = 'failed' AND holder_execution_id <> r_reporter))
  AND review_reason <> 'contradiction'
  RETURNING source, event_id, status, holder_execution_id, review_reason, NULL AS thread_open

-- SQLite: +status keeps the planner off the status index, which would read every entry of that status and look each up in the batch.
-- name: EventBatchHold
{{claim_rows}}
UPDATE webhook_events SET holder_execution_id = v_execution_id, last_seen_at = :now, updated_at = :now,
  review_reason = '', stale_alerted_at = NULL
  FROM v WHERE v_step = 'hold' AND source = v_source AND event_id = v_event_id AND item_count = 0
  AND +status = 'processing' AND holder_execution_id <> v_execution_id
  AND holder_execution_id IN (SELECT value FROM json_each(v_chain))
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, NULL AS presented

-- SQLite: RETURNING sees only the table written, not the claim's row:
-- presented stays NULL, and EventExecutionBatchPresent learns it by
-- recording the deliveries.
-- name: EventBatchInsert
{{claim_rows}}
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, created_at, updated_at, last_seen_at)
  SELECT v_source, v_event_id, 'processing', v_execution_id, :now, :now, :now
  FROM v WHERE v_step = 'insert' ORDER BY v_source, v_event_id
  ON CONFLICT (source, event_id) DO NOTHING
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, NULL AS presented

-- SQLite: no row locks and one writer: no entry of a batch can be held by
-- another session, and what this reads stays true until the batch commits.
-- It reads the entries' states (the claims are routed by them) and leaves
-- the executions to ExecutionBatchRead (NULL).
-- name: EventBatchLock
WITH k AS (SELECT j.value->>'$.source' AS k_source, j.value->>'$.event_id' AS k_event_id FROM json_each(:keys) AS j)
SELECT (SELECT json_group_array(json_object('source', source, 'event_id', event_id, 'status', status,
  'holder_execution_id', holder_execution_id, 'item_count', item_count))
  FROM k, webhook_events WHERE source = k_source AND event_id = k_event_id) AS entries,
  NULL AS executions

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventBatchMarkErrors
WITH r AS (SELECT j.value->>'$.source' AS r_source, j.value->>'$.event_id' AS r_event_id,
  j.value->>'$.holder' AS r_holder FROM json_each(:reviews) AS j)
UPDATE webhook_events SET review_reason = 'error', last_seen_at = :now
  FROM r WHERE source = r_source AND event_id = r_event_id AND +status = 'processing'
  AND holder_execution_id = r_holder AND review_reason = ''

-- SQLite: +status keeps the planner off the status index, which would read every entry of that status and look each up in the batch.
-- name: EventBatchReclaim
{{claim_rows}}
UPDATE webhook_events SET status = 'processing', holder_execution_id = v_execution_id, updated_at = :now,
  last_seen_at = :now, review_reason = ''
  FROM v WHERE v_step = 'reclaim' AND source = v_source AND event_id = v_event_id AND item_count = 0
  AND +status = 'failed'
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, NULL AS presented

-- name: EventBatchTouch
{{claim_rows}}
UPDATE webhook_events SET last_seen_at = :now
  FROM v WHERE v_step = 'touch' AND source = v_source AND event_id = v_event_id
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, NULL AS presented

-- SQLite: pragma_index_list and pragma_index_info instead of pg_index.
-- name: EventCountUniqueKeys
SELECT count(*) FROM pragma_index_list('webhook_events') l WHERE l."unique" = 1
  AND l.partial = 0 AND (SELECT count(*) FROM pragma_index_info(l.name)) = 2
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'source')
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'event_id')

-- SQLite: no FOR UPDATE SKIP LOCKED: SQLite has one writer, there is nothing to skip.
-- name: EventFindDone
SELECT source, event_id FROM webhook_events
  WHERE status = 'done' AND last_seen_at < ? ORDER BY last_seen_at LIMIT ?

-- SQLite: empty: no data-modifying WITH; the statements below write a round
-- of outcome reports one table at a time (PostgreSQL writes them in one).
-- name: OutcomeBatchWrite
