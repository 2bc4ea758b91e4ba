-- The ledger's entries: webhook_events (an event) and event_items (an item
-- of a multi-item event); the claim and outcome batches' writes.
--
-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../../sql/, in the file of the same name): row locks that skip what
-- another session holds, batches as one data-modifying statement, typed
-- parameters. The files' format is ../../sql/'s.

-- What a round of claims writes once it is decided, in one statement: the
-- new deliveries and those acted on, the entries' delivery counts, the
-- history lines and the counters (EventBatchCapture wrote the executions).
-- It returns the errors waiting for the round's executions (recorded
-- before they claimed, linked to no event): this statement began after the
-- capture took the executions' rows, so it sees an error that committed
-- meanwhile. Each row set is one JSON array of
-- objects, read by name. It is unnested from an array, which the planner
-- takes for about ten rows: jsonb_to_recordset it takes for a hundred, and
-- then it hashed the whole of a table of 20,000 entries rather than look
-- the batch's rows up (measured with auto_explain under load).
-- name: ClaimBatchWrite
WITH execution_rows AS (
  SELECT j->>'id' AS id, j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode,
  j->>'claimed_retry_of' AS claimed_retry_of, j->>'note' AS note
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
), acted_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:acted AS jsonb)))) AS j
), delivery_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, CAST(j->>'new' AS boolean) AS new,
  j->>'fingerprint' AS fingerprint, j->>'workflow_id' AS workflow_id, j->>'delivery_id' AS delivery_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:deliveries AS jsonb)))) AS j
), present_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id,
  j->>'delivery' AS delivery, CAST(j->>'acted' AS boolean) AS acted, j->>'delivery_id' AS delivery_id,
  j->>'workflow_id' AS workflow_id, j->>'class' AS class
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:presented AS jsonb)))) AS j
), history_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id,
  j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'node' AS node,
  j->>'decision' AS decision, j->>'delivery' AS delivery, j->>'class' AS class, j->>'status' AS status,
  j->>'message' AS message, j->>'retry_of' AS retry_of
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:history AS jsonb)))) AS j
), presented AS (
  INSERT INTO event_executions (source, event_id, execution_id, role, delivery, acted, delivery_id, workflow_id,
  class, first_seen_at)
  SELECT r.source, r.event_id, r.execution_id, 'claim', r.delivery, r.acted, r.delivery_id, r.workflow_id, r.class,
  CAST(:now AS timestamptz)
  FROM present_rows AS r ORDER BY r.source, r.event_id, r.execution_id
  ON CONFLICT (source, event_id, execution_id) DO UPDATE SET role = 'claim', delivery = excluded.delivery,
  acted = event_executions.acted OR excluded.acted, delivery_id = excluded.delivery_id,
  workflow_id = excluded.workflow_id, class = excluded.class
  WHERE event_executions.role <> 'claim'
  RETURNING 1
), acted AS (
  UPDATE event_executions AS x SET acted = true FROM acted_rows AS r
  WHERE x.source = r.source AND x.event_id = r.event_id AND x.execution_id = r.execution_id AND NOT x.acted
  RETURNING 1
), counted AS (
  UPDATE webhook_events AS w SET deliveries = w.deliveries + CASE WHEN r.new THEN 1 ELSE 0 END,
  fingerprint = CASE WHEN w.fingerprint = '' THEN r.fingerprint ELSE w.fingerprint END,
  first_workflow_id = CASE WHEN w.first_workflow_id = '' AND r.new THEN r.workflow_id ELSE w.first_workflow_id END,
  last_delivery_id = CASE WHEN r.new THEN r.delivery_id ELSE w.last_delivery_id END,
  last_presented_at = CASE WHEN r.new THEN CAST(:now AS timestamptz) ELSE w.last_presented_at END
  FROM delivery_rows AS r WHERE w.source = r.source AND w.event_id = r.event_id
  RETURNING 1
), history AS (
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref)
  SELECT r.source, r.event_id, '', CAST(:now AS timestamptz), 'claim', r.execution_id, r.retry_of, r.workflow_id,
  r.workflow_name, r.node, r.decision, r.delivery, r.class, r.status, '', r.message, ''
  FROM history_rows AS r
  RETURNING 1
), {{counters}}
SELECT execution_id, root_execution_id FROM n8n_errors WHERE source IS NULL
  AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
  AND execution_id <> '' AND execution_id IN (SELECT id FROM execution_rows)
UNION
SELECT execution_id, root_execution_id FROM n8n_errors WHERE source IS NULL
  AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
  AND root_execution_id IN (SELECT id FROM execution_rows)

-- The capture of a round's entries, in one statement. Each claim of :claims
-- (source, event_id, execution_id, chain, step) names the step the batch
-- expects, from what its lock read: insert a key it did not hold, reclaim a
-- failed entry, hold one in progress for an execution the claim's retries
-- (chain: the execution, then the ones it retries), touch any other (which
-- holds it when its execution does: Go reads that from the row). Each step
-- keeps its fence: an entry that moved since is not returned, or comes back
-- in a state that sends it to another step (failed, held by a retried one). Each entry returned says whether the claiming execution presented
-- the key before (presented), read under the entry's row lock, which the
-- batch took before (EventBatchLock) or by inserting the row. The
-- executions of the claims the round decides (:executions, one row each)
-- are written here, before the write reads the errors waiting for them
-- (ClaimBatchWrite): an error recorded at the same moment then either
-- committed before this statement took the execution's row, or waits for
-- the batch to commit and then sees its claim.
-- name: EventBatchCapture
WITH r AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id, j->>'step' AS step,
  j->'chain' AS chain
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:claims AS jsonb)))) AS j
), execution_rows AS (
  SELECT j->>'id' AS id, j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode,
  j->>'claimed_retry_of' AS claimed_retry_of, j->>'note' AS note
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
), inserted AS (
  INSERT INTO webhook_events AS w (source, event_id, status, holder_execution_id, created_at, updated_at, last_seen_at)
  SELECT r.source, r.event_id, 'processing', r.execution_id, CAST(:now AS timestamptz), CAST(:now AS timestamptz),
  CAST(:now AS timestamptz)
  FROM r WHERE r.step = 'insert' ORDER BY r.source, r.event_id
  ON CONFLICT (source, event_id) DO NOTHING
  RETURNING w.source, w.event_id, w.status, w.holder_execution_id, w.item_count, w.fingerprint, w.first_workflow_id,
  w.last_delivery_id, w.last_presented_at, w.deliveries, w.holder_execution_id AS execution_id, 'insert' AS step,
  false AS presented
), reclaimed AS (
  UPDATE webhook_events AS w SET status = 'processing', holder_execution_id = r.execution_id,
  updated_at = CAST(:now AS timestamptz), last_seen_at = CAST(:now AS timestamptz), review_reason = ''
  FROM r WHERE r.step = 'reclaim' AND w.source = r.source AND w.event_id = r.event_id AND w.item_count = 0
  AND w.status = 'failed'
  RETURNING w.source, w.event_id, w.status, w.holder_execution_id, w.item_count, w.fingerprint, w.first_workflow_id,
  w.last_delivery_id, w.last_presented_at, w.deliveries, r.execution_id, r.step,
  EXISTS (SELECT 1 FROM event_executions AS x WHERE x.source = r.source AND x.event_id = r.event_id
  AND x.execution_id = r.execution_id AND x.role = 'claim') AS presented
), held AS (
  UPDATE webhook_events AS w SET holder_execution_id = r.execution_id, last_seen_at = CAST(:now AS timestamptz),
  updated_at = CAST(:now AS timestamptz), review_reason = '', stale_alerted_at = NULL
  FROM r WHERE r.step = 'hold' AND w.source = r.source AND w.event_id = r.event_id AND w.item_count = 0
  AND w.status = 'processing' AND w.holder_execution_id <> r.execution_id
  AND w.holder_execution_id IN (SELECT jsonb_array_elements_text(r.chain))
  RETURNING w.source, w.event_id, w.status, w.holder_execution_id, w.item_count, w.fingerprint, w.first_workflow_id,
  w.last_delivery_id, w.last_presented_at, w.deliveries, r.execution_id, r.step,
  EXISTS (SELECT 1 FROM event_executions AS x WHERE x.source = r.source AND x.event_id = r.event_id
  AND x.execution_id = r.execution_id AND x.role = 'claim') AS presented
), touched AS (
  UPDATE webhook_events AS w SET last_seen_at = CAST(:now AS timestamptz)
  FROM r WHERE r.step = 'touch' AND w.source = r.source AND w.event_id = r.event_id
  RETURNING w.source, w.event_id, w.status, w.holder_execution_id, w.item_count, w.fingerprint, w.first_workflow_id,
  w.last_delivery_id, w.last_presented_at, w.deliveries, r.execution_id, r.step,
  EXISTS (SELECT 1 FROM event_executions AS x WHERE x.source = r.source AND x.event_id = r.event_id
  AND x.execution_id = r.execution_id AND x.role = 'claim') AS presented
), captured AS (
  SELECT * FROM inserted UNION ALL SELECT * FROM reclaimed UNION ALL SELECT * FROM held UNION ALL SELECT * FROM touched
), executions_upserted AS (
  INSERT INTO executions (execution_id, n8n_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at)
  SELECT e.id, e.id, e.workflow_id, e.workflow_name, e.mode, '', e.claimed_retry_of, e.id, '', e.note,
  CAST(:now AS timestamptz), CAST(:now AS timestamptz)
  FROM execution_rows AS e
  WHERE e.id IN (SELECT c.execution_id FROM captured AS c WHERE c.step <> 'touch' OR c.item_count = 0
  AND c.status <> 'failed')
  ORDER BY e.id
  ON CONFLICT (execution_id) DO UPDATE SET
{{execution_merge}}
  RETURNING 1
)
SELECT source, event_id, status, holder_execution_id, item_count, fingerprint, first_workflow_id, last_delivery_id,
  last_presented_at, deliveries, execution_id, step, presented FROM captured

-- PostgreSQL: empty: ClaimBatchWrite counts the deliveries with the rest.
-- name: EventBatchCountDeliveries

-- The fenced transition of outcome reports of events, one report an event:
-- done or failed moves the entry out of processing, unknown puts it in
-- review. Each report's reporter must hold the entry or be a Retry of its
-- holder (chain: the reporter, then what it retries, by the lineage n8n
-- confirmed); an entry nobody holds (a row written by SQL) takes the first
-- report; a Retry of the holder may also move a failed entry (nobody
-- captured it since the holder failed, and the retry acted again). The
-- reporter becomes the holder. Each comes back with whether people were
-- alerted about its event (an alert in its thread), for the news to follow
-- in that thread.
-- name: EventBatchFinish
WITH r AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'status' AS status, j->>'reporter' AS reporter,
  j->'chain' AS chain, j->>'crm_ref' AS crm_ref, j->>'thread' AS thread
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:reports AS jsonb)))) AS j
)
UPDATE webhook_events AS w SET status = CASE WHEN r.status = 'unknown' THEN 'processing' ELSE r.status END,
  holder_execution_id = r.reporter,
  updated_at = CASE WHEN r.status = 'unknown' AND w.status = 'processing' THEN w.updated_at
  ELSE CAST(:now AS timestamptz) END,
  last_seen_at = CAST(:now AS timestamptz), review_reason = CASE WHEN r.status = 'unknown' THEN 'unknown' ELSE '' END,
  crm_ref = CASE WHEN r.crm_ref <> '' THEN r.crm_ref ELSE w.crm_ref END
  FROM r WHERE w.source = r.source AND w.event_id = r.event_id AND w.item_count = 0
  AND (w.holder_execution_id IN (SELECT jsonb_array_elements_text(r.chain)) OR w.holder_execution_id = '')
  AND (w.status = 'processing' AND (r.status <> 'unknown' OR w.review_reason <> 'unknown'
  OR w.holder_execution_id <> r.reporter) OR (w.status = 'failed' AND w.holder_execution_id <> r.reporter))
  AND w.review_reason <> 'contradiction'
  RETURNING w.source, w.event_id, w.status, w.holder_execution_id, w.review_reason,
  EXISTS (SELECT 1 FROM outbox AS o WHERE o.kind = 'alert' AND o.thread_key = r.thread) AS thread_open

-- PostgreSQL: empty: EventBatchCapture captures the entries in one statement.
-- name: EventBatchHold

-- PostgreSQL: empty: EventBatchCapture captures the entries in one statement.
-- name: EventBatchInsert

-- Locks the rows of a batch's entries that exist, without waiting for one
-- another session holds, and reads the executions the batch names, in one
-- round trip. entries: each locked or held entry, held set when another
-- session holds it (to be set aside); the batch's statements change the
-- others without waiting, and their status and holder as locked. executions: those kept under the n8n ids of
-- :executions (empty for outcomes). :keys are the batch's (source,
-- event_id).
-- name: EventBatchLock
WITH k AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:keys AS jsonb)))) AS j
), ids AS (
  SELECT j->>'id' AS id FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
), entries AS (
  SELECT k.source, k.event_id, l.status IS NULL AS held, coalesce(l.status, '') AS status,
  coalesce(l.holder_execution_id, '') AS holder_execution_id, coalesce(l.item_count, 0) AS item_count FROM k
  LEFT JOIN LATERAL (SELECT w.status, w.holder_execution_id, w.item_count FROM webhook_events AS w
  WHERE w.source = k.source AND w.event_id = k.event_id FOR NO KEY UPDATE SKIP LOCKED) AS l ON true
  WHERE EXISTS (SELECT 1 FROM webhook_events AS w WHERE w.source = k.source AND w.event_id = k.event_id)
), known AS (
  SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, mode, n8n_status, first_seen_at, last_seen_at,
  started_at, ended_at, checked_at FROM executions WHERE n8n_id IN (SELECT id FROM ids) AND superseded_at IS NULL
)
SELECT (SELECT coalesce(json_agg(entries), '[]') FROM entries) AS entries,
  (SELECT coalesce(json_agg(known), '[]') FROM known) AS executions

-- PostgreSQL: empty: ErrorBatchWrite marks the entries for review with the rest.
-- name: EventBatchMarkErrors

-- PostgreSQL: empty: EventBatchCapture captures the entries in one statement.
-- name: EventBatchReclaim

-- PostgreSQL: empty: EventBatchCapture captures the entries in one statement.
-- name: EventBatchTouch

-- name: EventCountUniqueKeys
SELECT count(*) FROM pg_index i WHERE i.indrelid = 'webhook_events'::regclass
  AND i.indisunique AND i.indnkeyatts = 2 AND i.indpred IS NULL
  AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
  WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY['event_id', 'source']

-- name: EventFindDone
SELECT source, event_id FROM webhook_events
  WHERE status = 'done' AND last_seen_at < ? ORDER BY last_seen_at LIMIT ? FOR UPDATE SKIP LOCKED

-- What a round of finished outcome reports writes, in one statement: the
-- reporters' executions seen, the reporters of the events, the history
-- lines and the counters.
-- name: OutcomeBatchWrite
WITH execution_rows AS (
  SELECT j->>'id' AS id, j->>'workflow_id' AS workflow_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
), reporter_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:reporters AS jsonb)))) AS j
), history_rows AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id,
  j->>'decision' AS decision, j->>'status' AS status, j->>'message' AS message, j->>'crm_ref' AS crm_ref,
  j->>'item' AS item, j->>'retry_of' AS retry_of
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:history AS jsonb)))) AS j
), executions_seen AS (
  UPDATE executions AS x SET workflow_id = CASE WHEN r.workflow_id <> '' THEN r.workflow_id ELSE x.workflow_id END,
  last_seen_at = CAST(:now AS timestamptz)
  FROM execution_rows AS r WHERE x.execution_id = r.id
  RETURNING 1
), reporters AS (
  INSERT INTO event_executions (source, event_id, execution_id, role, first_seen_at)
  SELECT r.source, r.event_id, r.execution_id, 'report', CAST(:now AS timestamptz) FROM reporter_rows AS r
  ON CONFLICT (source, event_id, execution_id) DO NOTHING
  RETURNING 1
), history AS (
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  SELECT r.source, r.event_id, r.item, CAST(:now AS timestamptz), 'outcome', r.execution_id, r.retry_of, '', '', '',
  r.decision,
  '', '', r.status, '', r.message, r.crm_ref, NULL
  FROM history_rows AS r
  RETURNING 1
), {{counters}}
SELECT 1
