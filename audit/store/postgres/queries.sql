-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../shared.sql): row locks that skip what another session holds, batches
-- as unnested text arrays, typed time parameters.
--
-- Each statement follows a line "-- name: Name"; the store's queries struct
-- has a field of that name. Placeholders are ? (rebound by sqlx) or :name.

-- The counters a batch adds up (:counters, a row set of source,
-- workflow_id, metric, n) into the hour's shard, as a CTE of the batch's
-- write (ClaimBatchWrite, OutcomeBatchWrite, ErrorBatchWrite).
-- fragment: counters
counters AS (
  INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT CAST(:hour AS timestamptz), j->>'source', j->>'workflow_id', j->>'metric', CAST(:shard AS integer),
  CAST(j->>'n' AS integer)
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:counters AS jsonb)))) AS j
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n
  RETURNING 1
)

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

-- name: ExecutionBatchRead
WITH v AS (SELECT j->>'id' AS id FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j)
SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, mode, n8n_status, first_seen_at, last_seen_at,
  started_at, ended_at, checked_at FROM executions WHERE n8n_id IN (SELECT id FROM v) AND superseded_at IS NULL

-- PostgreSQL: empty: EventBatchLock reads the executions with the lock.
-- name: ExecutionBatchReadKnown

-- PostgreSQL: empty: EventBatchLock reads the holders with the lock.
-- name: EventBatchReadHolders

-- PostgreSQL: empty: EventBatchLock reads the holders with the lock.
-- name: EventBatchReadReportHolders

-- The capture of a round's entries, in one statement. Each claim of :claims
-- (source, event_id, execution_id, step) names the step the batch expects,
-- from what its lock read: insert a key it did not hold, reclaim a failed
-- entry, touch any other (which holds it when its execution does: Go reads
-- that from the row). Each step keeps its fence: an entry that moved since
-- is not returned, or comes back in a state that sends it one by one
-- (items, failed). Each entry returned says whether the claiming execution presented
-- the key before (presented), read under the entry's row lock, which the
-- batch took before (EventBatchLock) or by inserting the row. The
-- executions of the claims the round decides (:executions, one row each)
-- are written here, before the write reads the errors waiting for them
-- (ClaimBatchWrite): an error recorded at the same moment then either
-- committed before this statement took the execution's row, or waits for
-- the batch to commit and then sees its claim.
-- name: EventBatchCapture
WITH r AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'execution_id' AS execution_id, j->>'step' AS step
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
), touched AS (
  UPDATE webhook_events AS w SET last_seen_at = CAST(:now AS timestamptz)
  FROM r WHERE r.step = 'touch' AND w.source = r.source AND w.event_id = r.event_id
  RETURNING w.source, w.event_id, w.status, w.holder_execution_id, w.item_count, w.fingerprint, w.first_workflow_id,
  w.last_delivery_id, w.last_presented_at, w.deliveries, r.execution_id, r.step,
  EXISTS (SELECT 1 FROM event_executions AS x WHERE x.source = r.source AND x.event_id = r.event_id
  AND x.execution_id = r.execution_id AND x.role = 'claim') AS presented
), captured AS (
  SELECT * FROM inserted UNION ALL SELECT * FROM reclaimed UNION ALL SELECT * FROM touched
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

-- PostgreSQL: empty: EventBatchCapture captures the entries in one statement.
-- name: EventBatchInsert

-- PostgreSQL: empty: EventBatchCapture captures the entries in one statement.
-- name: EventBatchReclaim

-- PostgreSQL: empty: EventBatchCapture captures the entries in one statement.
-- name: EventBatchTouch

-- PostgreSQL: empty: EventBatchCapture reads whether an execution presented
-- its key before, and ClaimBatchWrite records it.
-- name: EventExecutionBatchPresent

-- PostgreSQL: empty: ClaimBatchWrite returns the errors waiting for the
-- round's executions.
-- name: ErrorBatchPending

-- name: OutboxBatchOpenThreads
WITH v AS (SELECT j->>'thread' AS thread FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:threads AS jsonb)))) AS j)
SELECT DISTINCT thread_key FROM outbox WHERE kind = 'alert' AND thread_key IN (SELECT thread FROM v)

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

-- Prepares the overview's read-only snapshot: no query of the page reads more
-- than some thousands of rows, and a parallel worker takes longer to start
-- than such a query runs (118 ms waiting for the worker of an 11 ms count).
-- name: OverviewSnapshot
SET LOCAL max_parallel_workers_per_gather = 0

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
  j->>'message' AS message
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
  SELECT r.source, r.event_id, '', CAST(:now AS timestamptz), 'claim', r.execution_id, '', r.workflow_id,
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

-- PostgreSQL: empty: ClaimBatchWrite writes the executions with the rest.
-- name: ExecutionBatchUpsert

-- PostgreSQL: empty: ClaimBatchWrite marks the deliveries acted on with the rest.
-- name: EventExecutionBatchMarkActed

-- PostgreSQL: empty: ClaimBatchWrite counts the deliveries with the rest.
-- name: EventBatchCountDeliveries

-- PostgreSQL: empty: ClaimBatchWrite writes the history with the rest.
-- name: HistoryBatchInsertClaims

-- PostgreSQL: empty: ClaimBatchWrite writes the counters with the rest.
-- name: StatsBatchAdd

-- The fenced transition of a round of outcome reports, each from the
-- execution that holds its entry (the chain is the reporter alone). Each
-- comes back with whether people were alerted about its event (an alert
-- in its thread), for the news to follow in that thread.
-- name: EventBatchFinish
WITH r AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'status' AS status, j->>'reporter' AS reporter,
  j->>'crm_ref' AS crm_ref, j->>'thread' AS thread
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:reports AS jsonb)))) AS j
)
UPDATE webhook_events AS w SET status = r.status, holder_execution_id = r.reporter,
  updated_at = CAST(:now AS timestamptz), last_seen_at = CAST(:now AS timestamptz), review_reason = '',
  crm_ref = CASE WHEN r.crm_ref <> '' THEN r.crm_ref ELSE w.crm_ref END
  FROM r WHERE w.source = r.source AND w.event_id = r.event_id AND w.item_count = 0
  AND (w.holder_execution_id = r.reporter OR w.holder_execution_id = '')
  AND (w.status = 'processing' OR (w.status = 'failed' AND w.holder_execution_id <> r.reporter))
  AND w.review_reason <> 'contradiction'
  RETURNING w.source, w.event_id, w.status, w.holder_execution_id, w.review_reason,
  EXISTS (SELECT 1 FROM outbox AS o WHERE o.kind = 'alert' AND o.thread_key = r.thread) AS thread_open

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
  j->>'decision' AS decision, j->>'status' AS status, j->>'message' AS message, j->>'crm_ref' AS crm_ref
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
  SELECT r.source, r.event_id, '', CAST(:now AS timestamptz), 'outcome', r.execution_id, '', '', '', '', r.decision,
  '', '', r.status, '', r.message, r.crm_ref, NULL
  FROM history_rows AS r
  RETURNING 1
), {{counters}}
SELECT 1

-- PostgreSQL: empty: OutcomeBatchWrite writes the executions seen with the rest.
-- name: ExecutionBatchSeen

-- PostgreSQL: empty: OutcomeBatchWrite records the reporters with the rest.
-- name: EventExecutionBatchReporters

-- PostgreSQL: empty: OutcomeBatchWrite writes the history with the rest.
-- name: HistoryBatchInsertOutcomes

-- The executions of a round of error payloads, each known as itself and
-- with no lineage, seen again: a payload's fields fill in what it says, as
-- UpsertExecution does for a row it finds. It returns them as ReadExecution
-- does; one superseded, or given a retry_of, since the batch read it is not
-- the one its payloads were judged against: they go one by one.
-- name: ExecutionBatchErrorSeen
WITH r AS (
  SELECT j->>'id' AS id, j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode,
  j->>'url' AS url
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
)
UPDATE executions AS x SET workflow_id = CASE WHEN r.workflow_id <> '' THEN r.workflow_id ELSE x.workflow_id END,
  workflow_name = CASE WHEN r.workflow_name <> '' THEN r.workflow_name ELSE x.workflow_name END,
  mode = CASE WHEN r.mode <> '' THEN r.mode ELSE x.mode END,
  n8n_url = CASE WHEN r.url <> '' THEN r.url ELSE x.n8n_url END,
  last_seen_at = CAST(:now AS timestamptz)
  FROM r WHERE x.execution_id = r.id AND x.superseded_at IS NULL
  RETURNING x.execution_id, x.workflow_id, x.workflow_name, x.mode, x.retry_of, x.claimed_retry_of,
  x.root_execution_id, x.n8n_url, x.lineage_note, x.first_seen_at, x.last_seen_at

-- The entries the executions of a round of error payloads touched, each
-- execution's in FindEvents' order, under their row lock (as AttachError
-- takes it): a claim that takes an entry over commits before or after the
-- round judges it, never between.
-- name: EventExecutionBatchEvents
WITH v AS (
  SELECT j->>'id' AS v_id FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
)
SELECT ee.execution_id, w.source, w.event_id, w.status, w.holder_execution_id, w.updated_at, w.deliveries, w.crm_ref
  FROM event_executions AS ee JOIN webhook_events AS w ON w.source = ee.source AND w.event_id = ee.event_id
  WHERE ee.execution_id IN (SELECT v_id FROM v)
  ORDER BY ee.execution_id, ee.first_seen_at, ee.source, ee.event_id
  FOR UPDATE OF w

-- A round of error payloads, each the first of its execution, recorded in
-- one statement: the errors linked to their first event, then, for those
-- recorded now (a dedupe key already recorded makes a duplicate, which
-- links nothing), their history lines and the review of the entries their
-- execution holds. It returns the errors recorded.
-- name: ErrorBatchInsert
WITH error_rows AS (
  SELECT j->>'dedupe_key' AS dedupe_key, j->>'kind' AS kind, j->>'execution_id' AS execution_id,
  j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode, j->>'node' AS node,
  j->>'message' AS message, j->>'http_code' AS http_code, j->>'url' AS url, j->>'payload' AS payload,
  CAST(j->>'truncated' AS boolean) AS truncated, j->>'note' AS note, j->>'source' AS source, j->>'event_id' AS event_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:errors AS jsonb)))) AS j
), history_rows AS (
  SELECT j->>'dedupe_key' AS dedupe_key, j->>'source' AS source, j->>'event_id' AS event_id,
  j->>'execution_id' AS execution_id, j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name,
  j->>'node' AS node, j->>'decision' AS decision, j->>'message' AS message
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:history AS jsonb)))) AS j
), review_rows AS (
  SELECT j->>'dedupe_key' AS dedupe_key, j->>'source' AS source, j->>'event_id' AS event_id, j->>'holder' AS holder
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:reviews AS jsonb)))) AS j
), inserted AS (
  INSERT INTO n8n_errors (dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id, workflow_id,
  workflow_name, mode, node, message, http_code, n8n_url, payload, payload_truncated, intake_note, source, event_id)
  SELECT r.dedupe_key, CAST(:now AS timestamptz), r.kind, r.execution_id, '', r.execution_id, r.workflow_id,
  r.workflow_name, r.mode, r.node, r.message, r.http_code, r.url, r.payload, r.truncated, r.note, r.source, r.event_id
  FROM error_rows AS r
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING id, dedupe_key
), history AS (
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  SELECT r.source, r.event_id, '', CAST(:now AS timestamptz), 'error', r.execution_id, '', r.workflow_id,
  r.workflow_name, r.node, r.decision, '', '', '', '', r.message, '', i.id
  FROM history_rows AS r JOIN inserted AS i ON i.dedupe_key = r.dedupe_key
  RETURNING 1
), reviews AS (
  UPDATE webhook_events AS w SET review_reason = 'error', last_seen_at = CAST(:now AS timestamptz)
  FROM review_rows AS r JOIN inserted AS i ON i.dedupe_key = r.dedupe_key
  WHERE w.source = r.source AND w.event_id = r.event_id AND w.status = 'processing'
  AND w.holder_execution_id = r.holder AND w.review_reason = ''
  RETURNING 1
)
SELECT id, dedupe_key FROM inserted

-- The alerts of a round of error payloads, and their counters, in one
-- statement: written once the errors have their ids, which the alerts name.
-- name: ErrorBatchWrite
WITH outbox_rows AS (
  SELECT j->>'thread_key' AS thread_key, j->>'kind' AS kind, j->>'source' AS source, j->>'event_id' AS event_id,
  CAST(j->>'error_id' AS bigint) AS error_id, j->>'payload' AS payload, j->>'state' AS state,
  j->>'last_error' AS last_error, j->>'alert_kind' AS alert_kind
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:outbox AS jsonb)))) AS j
), outbox AS (
  INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state, last_error,
  alert_kind)
  SELECT CAST(:now AS timestamptz), CAST(:now AS timestamptz), r.thread_key, r.kind, r.source, r.event_id, r.error_id,
  r.payload, r.state, r.last_error, r.alert_kind
  FROM outbox_rows AS r
  RETURNING 1
), {{counters}}
SELECT 1

-- PostgreSQL: empty: ErrorBatchInsert writes the history with the errors.
-- name: HistoryBatchInsertErrors

-- PostgreSQL: empty: ErrorBatchInsert marks the entries for review with the errors.
-- name: EventBatchMarkErrors

-- PostgreSQL: empty: ErrorBatchWrite writes the alerts with their counters.
-- name: OutboxBatchInsert
