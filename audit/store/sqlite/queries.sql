-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../shared.sql). Each says where and why it differs.
--
-- Each statement follows a line "-- name: Name"; the store's queries struct
-- has a field of that name. Placeholders are ? (rebound by sqlx) or :name.

-- A round's claims (:claims, a row set of source, event_id, execution_id)
-- as the CTE v of the capture's steps (EventBatchInsert, EventBatchReclaim,
-- EventBatchTouch).
-- fragment: claim_rows
WITH v AS (
  SELECT j.value->>'$.source' AS v_source, j.value->>'$.event_id' AS v_event_id,
  j.value->>'$.execution_id' AS v_execution_id
  FROM json_each(:claims) AS j
)

-- SQLite: no FOR UPDATE SKIP LOCKED: SQLite has one writer, there is nothing to skip.
-- name: LeaseOutbox
WITH picked AS MATERIALIZED (SELECT o.id FROM outbox o
  WHERE (o.state = 'pending' OR (o.state = 'sending' AND o.lease_until < :now)) AND o.due_at <= :now
  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.thread_key = o.thread_key AND p.id < o.id
  AND p.state IN ('pending', 'sending'))
  ORDER BY o.id LIMIT :limit)
  UPDATE outbox SET state = 'sending', lease_owner = :owner, lease_until = :until, attempts = attempts + 1,
  maybe_sent = (maybe_sent OR state = 'sending'),
  attempted_by = CASE WHEN state = 'sending' THEN lease_owner ELSE attempted_by END,
  first_attempt_at = COALESCE(first_attempt_at, :now)
  WHERE id IN (SELECT id FROM picked)
  AND (state = 'pending' OR (state = 'sending' AND lease_until < :now))
  RETURNING id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent

-- SQLite: no FOR UPDATE SKIP LOCKED: SQLite has one writer, there is nothing to skip.
-- name: FindDoneEntries
SELECT source, event_id FROM webhook_events
  WHERE status = 'done' AND last_seen_at < ? ORDER BY last_seen_at LIMIT ?

-- SQLite: no FOR UPDATE SKIP LOCKED: SQLite has one writer, there is nothing to skip.
-- name: FindUnlinkedErrors
SELECT id FROM n8n_errors WHERE source IS NULL AND received_at < ?
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id)
  ORDER BY id LIMIT ?

-- SQLite: pragma_index_list and pragma_index_info instead of pg_index.
-- name: CountUniqueKeys
SELECT count(*) FROM pragma_index_list('webhook_events') l WHERE l."unique" = 1
  AND l.partial = 0 AND (SELECT count(*) FROM pragma_index_info(l.name)) = 2
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'source')
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'event_id')

-- name: ExecutionBatchRead
WITH v AS (SELECT j.value->>'$.id' AS id FROM json_each(:executions) AS j)
SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, mode, n8n_status, first_seen_at, last_seen_at,
  started_at, ended_at, checked_at FROM executions WHERE n8n_id IN (SELECT id FROM v) AND superseded_at IS NULL

-- name: ExecutionBatchReadKnown
WITH v AS (SELECT j.value->>'$.id' AS id FROM json_each(:executions) AS j)
SELECT n8n_id FROM executions WHERE n8n_id IN (SELECT id FROM v) AND superseded_at IS NULL
  AND (retry_of <> '' OR mode <> '')

-- SQLite: +status keeps the planner off the status index, which would read every entry of that status and look each up in the batch.
-- name: EventBatchReadHolders
WITH k AS (SELECT j.value->>'$.source' AS k_source, j.value->>'$.event_id' AS k_event_id FROM json_each(:keys) AS j)
SELECT source, event_id, holder_execution_id FROM k, webhook_events WHERE source = k_source AND event_id = k_event_id
  AND item_count = 0 AND +status = 'processing' AND holder_execution_id <> ''

-- SQLite: +status keeps the planner off the status index, which would read every entry of that status and look each up in the batch.
-- name: EventBatchReadReportHolders
WITH k AS (SELECT j.value->>'$.source' AS k_source, j.value->>'$.event_id' AS k_event_id FROM json_each(:keys) AS j)
SELECT source, event_id, holder_execution_id FROM k, webhook_events WHERE source = k_source AND event_id = k_event_id
  AND item_count = 0 AND +status IN ('processing', 'failed') AND holder_execution_id <> ''

-- SQLite: empty: no data-modifying WITH; the three statements below
-- capture a round's entries one step at a time, each trying the claims the
-- one before did not return.
-- name: EventBatchCapture

-- SQLite: RETURNING sees only the table written, not the claim's row:
-- presented stays NULL, and EventExecutionBatchPresent learns it by
-- recording the deliveries.
-- name: EventBatchInsert
{{claim_rows}}
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, created_at, updated_at, last_seen_at)
  SELECT v_source, v_event_id, 'processing', v_execution_id, :now, :now, :now
  FROM v WHERE true ORDER BY v_source, v_event_id
  ON CONFLICT (source, event_id) DO NOTHING
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, NULL AS presented

-- SQLite: +status keeps the planner off the status index, which would read every entry of that status and look each up in the batch.
-- name: EventBatchReclaim
{{claim_rows}}
UPDATE webhook_events SET status = 'processing', holder_execution_id = v_execution_id, updated_at = :now,
  last_seen_at = :now, review_reason = ''
  FROM v WHERE source = v_source AND event_id = v_event_id AND item_count = 0 AND +status = 'failed'
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, NULL AS presented

-- name: EventBatchTouch
{{claim_rows}}
UPDATE webhook_events SET last_seen_at = :now
  FROM v WHERE source = v_source AND event_id = v_event_id
  RETURNING source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id,
  last_delivery_id, last_presented_at, deliveries, NULL AS presented

-- Records that each execution of a round presented its key, and returns
-- the keys it presented for the first time. :presented rows carry the
-- delivery and class decided before. (PostgreSQL: empty, it learns this with
-- the entries and writes it in ClaimBatchWrite.)
-- name: EventExecutionBatchPresent
WITH v AS (
  SELECT j.value->>'$.source' AS v_source, j.value->>'$.event_id' AS v_event_id,
  j.value->>'$.execution_id' AS v_execution_id, j.value->>'$.delivery' AS v_delivery, j.value->>'$.acted' AS v_acted,
  j.value->>'$.delivery_id' AS v_delivery_id, j.value->>'$.workflow_id' AS v_workflow_id, j.value->>'$.class' AS v_class
  FROM json_each(:presented) AS j
)
INSERT INTO event_executions (source, event_id, execution_id, role, delivery, acted, delivery_id, workflow_id,
  class, first_seen_at)
  SELECT v_source, v_event_id, v_execution_id, 'claim', v_delivery, v_acted, v_delivery_id,
  v_workflow_id, v_class, :now FROM v WHERE true
  ON CONFLICT (source, event_id, execution_id) DO UPDATE SET role = 'claim', delivery = excluded.delivery,
  acted = event_executions.acted OR excluded.acted, delivery_id = excluded.delivery_id,
  workflow_id = excluded.workflow_id, class = excluded.class
  WHERE event_executions.role <> 'claim'
  RETURNING source, event_id

-- SQLite: +source and INDEXED BY keep the planner off the event index: it read every unlinked error.
-- name: ErrorBatchPending
WITH v AS (SELECT j.value->>'$.id' AS id FROM json_each(:executions) AS j)
SELECT execution_id, root_execution_id FROM n8n_errors WHERE +source IS NULL
  AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
  AND execution_id <> '' AND execution_id IN (SELECT id FROM v)
UNION
SELECT execution_id, root_execution_id FROM n8n_errors INDEXED BY n8n_errors_unlinked_root WHERE source IS NULL
  AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
  AND root_execution_id IN (SELECT id FROM v)

-- name: OutboxBatchOpenThreads
WITH v AS (SELECT j.value->>'$.thread' AS thread FROM json_each(:threads) AS j)
SELECT DISTINCT thread_key FROM outbox WHERE kind = 'alert' AND thread_key IN (SELECT thread FROM v)

-- SQLite: empty: SQLite has no row locks and one writer, so no entry of a batch can be held by another session.
-- name: EventBatchLock

-- SQLite: empty: the overview reads outside a transaction, which would take
-- the write lock.
-- name: OverviewSnapshot

-- SQLite: empty: no data-modifying WITH; the statements below write a round
-- of claims one table at a time (PostgreSQL writes them in one).
-- name: ClaimBatchWrite

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ExecutionBatchUpsert
WITH r AS (SELECT j.value->>'$.id' AS id, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.mode' AS mode,
  j.value->>'$.claimed_retry_of' AS claimed_retry_of, j.value->>'$.note' AS note FROM json_each(:executions) AS j)
  INSERT INTO executions (execution_id, n8n_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at)
  SELECT id, id, workflow_id, workflow_name, mode, '', claimed_retry_of, id, '', note, :now, :now
  FROM r WHERE true ORDER BY id
  ON CONFLICT (execution_id) DO UPDATE SET
{{execution_merge}}

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventExecutionBatchMarkActed
WITH r AS (SELECT j.value->>'$.source' AS r_source, j.value->>'$.event_id' AS r_event_id,
  j.value->>'$.execution_id' AS r_execution_id FROM json_each(:acted) AS j)
  UPDATE event_executions SET acted = (1 = 1) FROM r
  WHERE source = r_source AND event_id = r_event_id AND execution_id = r_execution_id AND NOT acted

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
-- name: HistoryBatchInsertClaims
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.node' AS node, j.value->>'$.decision' AS decision,
  j.value->>'$.delivery' AS delivery, j.value->>'$.class' AS class, j.value->>'$.status' AS status,
  j.value->>'$.message' AS message FROM json_each(:history) AS j)
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref)
  SELECT source, event_id, '', :now, 'claim', execution_id, '', workflow_id, workflow_name,
  node, decision, delivery, class, status, '', message, '' FROM r

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: StatsBatchAdd
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.metric' AS metric, j.value->>'$.n' AS n FROM json_each(:counters) AS j)
  INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT :hour, source, workflow_id, metric, :shard, n FROM r WHERE true
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventBatchFinish
WITH r AS (SELECT j.value->>'$.source' AS r_source, j.value->>'$.event_id' AS r_event_id,
  j.value->>'$.status' AS r_status, j.value->>'$.reporter' AS r_reporter, j.value->>'$.crm_ref' AS r_crm_ref
  FROM json_each(:reports) AS j)
UPDATE webhook_events SET status = r_status, holder_execution_id = r_reporter, updated_at = :now,
  last_seen_at = :now, review_reason = '', crm_ref = CASE WHEN r_crm_ref <> '' THEN r_crm_ref ELSE crm_ref END
  FROM r WHERE source = r_source AND event_id = r_event_id AND item_count = 0
  AND (holder_execution_id = r_reporter OR holder_execution_id = '')
  AND (+status = 'processing' OR (status = 'failed' AND holder_execution_id <> r_reporter))
  AND review_reason <> 'contradiction'
  RETURNING source, event_id, status, holder_execution_id, review_reason, NULL AS thread_open

-- SQLite: empty: no data-modifying WITH; the statements below write a round
-- of outcome reports one table at a time (PostgreSQL writes them in one).
-- name: OutcomeBatchWrite

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ExecutionBatchSeen
WITH r AS (SELECT j.value->>'$.id' AS r_id, j.value->>'$.workflow_id' AS r_workflow_id FROM json_each(:executions) AS j)
UPDATE executions SET workflow_id = CASE WHEN r_workflow_id <> '' THEN r_workflow_id ELSE workflow_id END,
  last_seen_at = :now FROM r WHERE execution_id = r_id

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventExecutionBatchReporters
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id FROM json_each(:reporters) AS j)
INSERT INTO event_executions (source, event_id, execution_id, role, first_seen_at)
  SELECT source, event_id, execution_id, 'report', :now FROM r WHERE true
  ON CONFLICT (source, event_id, execution_id) DO NOTHING

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: HistoryBatchInsertOutcomes
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.decision' AS decision, j.value->>'$.status' AS status,
  j.value->>'$.message' AS message, j.value->>'$.crm_ref' AS crm_ref FROM json_each(:history) AS j)
INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  SELECT source, event_id, '', :now, 'outcome', execution_id, '', '', '', '', decision, '', '', status, '', message,
  crm_ref, NULL FROM r

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: ExecutionBatchErrorSeen
WITH r AS (SELECT j.value->>'$.id' AS r_id, j.value->>'$.workflow_id' AS r_workflow_id,
  j.value->>'$.workflow_name' AS r_workflow_name, j.value->>'$.mode' AS r_mode, j.value->>'$.url' AS r_url
  FROM json_each(:executions) AS j)
UPDATE executions SET workflow_id = CASE WHEN r_workflow_id <> '' THEN r_workflow_id ELSE workflow_id END,
  workflow_name = CASE WHEN r_workflow_name <> '' THEN r_workflow_name ELSE workflow_name END,
  mode = CASE WHEN r_mode <> '' THEN r_mode ELSE mode END,
  n8n_url = CASE WHEN r_url <> '' THEN r_url ELSE n8n_url END,
  last_seen_at = :now FROM r WHERE execution_id = r_id AND superseded_at IS NULL
  RETURNING execution_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of, root_execution_id, n8n_url,
  lineage_note, first_seen_at, last_seen_at

-- SQLite: no row lock to take (one writer).
-- name: EventExecutionBatchEvents
WITH v AS (SELECT j.value->>'$.id' AS v_id FROM json_each(:executions) AS j)
SELECT ee.execution_id, w.source, w.event_id, w.status, w.holder_execution_id, w.updated_at, w.deliveries, w.crm_ref
  FROM event_executions AS ee JOIN webhook_events AS w ON w.source = ee.source AND w.event_id = ee.event_id
  WHERE ee.execution_id IN (SELECT v_id FROM v)
  ORDER BY ee.execution_id, ee.first_seen_at, ee.source, ee.event_id

-- SQLite: the errors alone; the statements below write their history and
-- the entries' review (PostgreSQL writes them in this one).
-- name: ErrorBatchInsert
WITH r AS (SELECT j.value->>'$.dedupe_key' AS dedupe_key, j.value->>'$.kind' AS kind,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.mode' AS mode, j.value->>'$.node' AS node,
  j.value->>'$.message' AS message, j.value->>'$.http_code' AS http_code, j.value->>'$.url' AS url,
  j.value->>'$.payload' AS payload, j.value->>'$.truncated' AS truncated, j.value->>'$.note' AS note,
  j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id FROM json_each(:errors) AS j)
INSERT INTO n8n_errors (dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id, workflow_id,
  workflow_name, mode, node, message, http_code, n8n_url, payload, payload_truncated, intake_note, source, event_id)
  SELECT dedupe_key, :now, kind, execution_id, '', execution_id, workflow_id, workflow_name, mode, node, message,
  http_code, url, payload, truncated, note, source, event_id FROM r WHERE true
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING id, dedupe_key

-- SQLite: empty: no data-modifying WITH; the statements below write the
-- alerts of a round of error payloads one table at a time (PostgreSQL
-- writes them in one).
-- name: ErrorBatchWrite

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: HistoryBatchInsertErrors
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.node' AS node, j.value->>'$.decision' AS decision,
  j.value->>'$.message' AS message, j.value->>'$.error_id' AS error_id FROM json_each(:history) AS j)
INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  SELECT source, event_id, '', :now, 'error', execution_id, '', workflow_id, workflow_name, node, decision, '', '', '',
  '', message, '', error_id FROM r

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: EventBatchMarkErrors
WITH r AS (SELECT j.value->>'$.source' AS r_source, j.value->>'$.event_id' AS r_event_id,
  j.value->>'$.holder' AS r_holder FROM json_each(:reviews) AS j)
UPDATE webhook_events SET review_reason = 'error', last_seen_at = :now
  FROM r WHERE source = r_source AND event_id = r_event_id AND +status = 'processing'
  AND holder_execution_id = r_holder AND review_reason = ''

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: OutboxBatchInsert
WITH r AS (SELECT j.value->>'$.thread_key' AS thread_key, j.value->>'$.kind' AS kind, j.value->>'$.source' AS source,
  j.value->>'$.event_id' AS event_id, j.value->>'$.error_id' AS error_id, j.value->>'$.payload' AS payload,
  j.value->>'$.state' AS state, j.value->>'$.last_error' AS last_error, j.value->>'$.alert_kind' AS alert_kind
  FROM json_each(:outbox) AS j)
INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state, last_error,
  alert_kind)
  SELECT :now, :now, thread_key, kind, source, event_id, error_id, payload, state, last_error, alert_kind FROM r
