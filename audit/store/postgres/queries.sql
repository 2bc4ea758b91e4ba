-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../shared.sql): row locks that skip what another session holds, batches
-- as unnested text arrays, typed time parameters.
--
-- Each statement follows a line "-- name: Name"; the store's queries struct
-- has a field of that name. Placeholders are ? (rebound by sqlx) or :name.

-- name: LeaseOutbox
WITH picked AS MATERIALIZED (SELECT o.id FROM outbox o
  WHERE (o.state = 'pending' OR (o.state = 'sending' AND o.lease_until < :now)) AND o.due_at <= :now
  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.thread_key = o.thread_key AND p.id < o.id
  AND p.state IN ('pending', 'sending'))
  ORDER BY o.id LIMIT :limit FOR UPDATE SKIP LOCKED)
  UPDATE outbox SET state = 'sending', lease_owner = :owner, lease_until = :until, attempts = attempts + 1,
  maybe_sent = (maybe_sent OR state = 'sending'),
  attempted_by = CASE WHEN state = 'sending' THEN lease_owner ELSE attempted_by END,
  first_attempt_at = COALESCE(first_attempt_at, :now)
  WHERE id IN (SELECT id FROM picked)
  AND (state = 'pending' OR (state = 'sending' AND lease_until < :now))
  RETURNING id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent

-- name: FindDoneEntries
SELECT source, event_id FROM webhook_events
  WHERE status = 'done' AND last_seen_at < ? ORDER BY last_seen_at LIMIT ? FOR UPDATE SKIP LOCKED

-- name: FindUnlinkedErrors
SELECT id FROM n8n_errors WHERE source IS NULL AND received_at < ?
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id)
  ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED

-- name: CountUniqueKeys
SELECT count(*) FROM pg_index i WHERE i.indrelid = 'webhook_events'::regclass
  AND i.indisunique AND i.indnkeyatts = 2 AND i.indpred IS NULL
  AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
  WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY['event_id', 'source']

-- name: BatchReadExecutions
WITH v AS (SELECT * FROM unnest(?::text[]) AS r(v_id))
  SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, n8n_status, first_seen_at, last_seen_at, started_at,
  ended_at, checked_at FROM executions WHERE n8n_id IN (SELECT v_id FROM v) AND superseded_at IS NULL

-- name: BatchUpsertExecutions
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[]) AS r(v_id, v_workflow_id, v_workflow_name, v_mode, v_claimed, v_note))
  INSERT INTO executions (execution_id, n8n_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at)
  SELECT v_id, v_id, v_workflow_id, v_workflow_name, v_mode, '', v_claimed, v_id, '', v_note, CAST(? AS timestamptz), CAST(? AS timestamptz)
  FROM v WHERE true ORDER BY v_id
  ON CONFLICT (execution_id) DO UPDATE SET
  workflow_id = CASE WHEN excluded.workflow_id <> '' THEN excluded.workflow_id ELSE executions.workflow_id END,
  workflow_name = CASE WHEN excluded.workflow_name <> '' THEN excluded.workflow_name ELSE executions.workflow_name END,
  mode = CASE WHEN excluded.mode <> '' THEN excluded.mode ELSE executions.mode END,
  lineage_note = CASE WHEN excluded.lineage_note <> '' THEN excluded.lineage_note ELSE executions.lineage_note END,
  claimed_retry_of = CASE WHEN excluded.claimed_retry_of <> '' THEN excluded.claimed_retry_of
  ELSE executions.claimed_retry_of END,
  last_seen_at = excluded.last_seen_at

-- name: BatchReadKnown
WITH v AS (SELECT * FROM unnest(?::text[]) AS r(v_id))
  SELECT n8n_id FROM executions WHERE n8n_id IN (SELECT v_id FROM v) AND superseded_at IS NULL
  AND (retry_of <> '' OR mode <> '')

-- name: BatchReadHolders
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[]) AS r(v_source, v_event_id))
  SELECT source, event_id, holder_execution_id FROM webhook_events, v WHERE source = v_source AND event_id = v_event_id AND item_count = 0
  AND status = 'processing' AND holder_execution_id <> ''

-- name: BatchReadReportHolders
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[]) AS r(v_source, v_event_id))
  SELECT source, event_id, holder_execution_id FROM webhook_events, v WHERE source = v_source AND event_id = v_event_id AND item_count = 0
  AND status IN ('processing', 'failed') AND holder_execution_id <> ''

-- name: BatchInsertEntries
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) AS r(v_source, v_event_id, v_holder))
  INSERT INTO webhook_events (source, event_id, status, holder_execution_id, created_at, updated_at, last_seen_at)
  SELECT v_source, v_event_id, 'processing', v_holder, CAST(? AS timestamptz), CAST(? AS timestamptz), CAST(? AS timestamptz)
  FROM v WHERE true ORDER BY v_source, v_event_id
  ON CONFLICT (source, event_id) DO NOTHING RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at

-- name: BatchReclaim
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) AS r(v_source, v_event_id, v_holder))
  UPDATE webhook_events SET status = 'processing', holder_execution_id = v_holder, updated_at = ?,
  last_seen_at = ?, review_reason = '' FROM v WHERE source = v_source AND event_id = v_event_id AND item_count = 0 AND status = 'failed' RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at

-- name: BatchHold
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) AS r(v_source, v_event_id, v_holder))
  UPDATE webhook_events SET last_seen_at = ? FROM v
  WHERE source = v_source AND event_id = v_event_id AND item_count = 0 AND status = 'processing' AND holder_execution_id = v_holder RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at

-- name: BatchTouch
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[]) AS r(v_source, v_event_id))
  UPDATE webhook_events SET last_seen_at = ? FROM v WHERE source = v_source AND event_id = v_event_id RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at

-- name: BatchPresent
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[]) AS r(v_source, v_event_id, v_execution_id, v_delivery, v_acted, v_delivery_id, v_workflow_id, v_class))
  INSERT INTO event_executions (source, event_id, execution_id, role, delivery, acted, delivery_id, workflow_id,
  class, first_seen_at)
  SELECT v_source, v_event_id, v_execution_id, 'claim', v_delivery, CAST(v_acted AS boolean), v_delivery_id,
  v_workflow_id, v_class, CAST(? AS timestamptz) FROM v WHERE true
  ON CONFLICT (source, event_id, execution_id) DO UPDATE SET role = 'claim', delivery = excluded.delivery,
  acted = event_executions.acted OR excluded.acted, delivery_id = excluded.delivery_id,
  workflow_id = excluded.workflow_id, class = excluded.class
  WHERE event_executions.role <> 'claim'
  RETURNING source, event_id

-- name: BatchMarkActed
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) AS r(v_source, v_event_id, v_execution_id))
  UPDATE event_executions SET acted = (1 = 1) FROM v
  WHERE source = v_source AND event_id = v_event_id AND execution_id = v_execution_id AND NOT acted

-- name: BatchCountDeliveries
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[]) AS r(v_source, v_event_id, v_new, v_fingerprint, v_workflow_id, v_delivery_id))
  UPDATE webhook_events SET deliveries = deliveries + CAST(v_new AS integer),
  fingerprint = CASE WHEN fingerprint = '' THEN v_fingerprint ELSE fingerprint END,
  first_workflow_id = CASE WHEN first_workflow_id = '' AND v_new = '1' THEN v_workflow_id ELSE first_workflow_id END,
  last_delivery_id = CASE WHEN v_new = '1' THEN v_delivery_id ELSE last_delivery_id END,
  last_presented_at = CASE WHEN v_new = '1' THEN ? ELSE last_presented_at END
  FROM v WHERE source = v_source AND event_id = v_event_id
  RETURNING source, event_id, deliveries, fingerprint

-- name: BatchWrite
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[]) AS r(v_source, v_event_id, v_execution_id, v_workflow_id, v_workflow_name, v_node, v_decision, v_delivery, v_class, v_status, v_message))
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref)
  SELECT v_source, v_event_id, '', CAST(? AS timestamptz), 'claim', v_execution_id, '', v_workflow_id, v_workflow_name,
  v_node, v_decision, v_delivery, v_class, v_status, '', v_message, '' FROM v

-- name: BatchCount
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(v_source, v_workflow_id, v_metric, v_n))
  INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT CAST(? AS timestamptz), v_source, v_workflow_id, v_metric, CAST(? AS integer), CAST(v_n AS integer) FROM v WHERE true
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n

-- name: BatchPendingErrors
WITH v AS (SELECT * FROM unnest(?::text[]) AS r(v_id))
  SELECT DISTINCT execution_id, root_execution_id FROM n8n_errors WHERE source IS NULL
  AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
  AND (execution_id IN (SELECT v_id FROM v) OR root_execution_id IN (SELECT v_id FROM v))

-- name: BatchOpenThreads
WITH v AS (SELECT * FROM unnest(?::text[]) AS r(v_thread))
  SELECT DISTINCT thread_key FROM outbox WHERE kind = 'alert' AND thread_key IN (SELECT v_thread FROM v)

-- name: BatchLockEntries
WITH v AS (SELECT * FROM unnest(?::text[], ?::text[]) AS r(v_source, v_event_id))
  SELECT v_source AS source, v_event_id AS event_id FROM v
  LEFT JOIN LATERAL (SELECT true AS mine FROM webhook_events
  WHERE source = v_source AND event_id = v_event_id FOR NO KEY UPDATE SKIP LOCKED) l ON true
  WHERE l.mine IS NULL
  AND EXISTS (SELECT 1 FROM webhook_events w WHERE w.source = v_source AND w.event_id = v_event_id)
  ORDER BY v_source, v_event_id

-- Prepares the overview's read-only snapshot: no query of the page reads more
-- than some thousands of rows, and a parallel worker takes longer to start
-- than such a query runs (118 ms waiting for the worker of an 11 ms count).
-- name: OverviewSnapshot
SET LOCAL max_parallel_workers_per_gather = 0
