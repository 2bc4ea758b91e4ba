-- The ledger's two statements: a batch locks and reads (LedgerLock), Go
-- decides (audit.Decider), the batch writes (LedgerWrite). The rules are in
-- Go; SQL keeps what the database must: the unique keys (a key another
-- session made since the lock fails the insert, and the batch runs again)
-- and each entry as it was locked (its version).
--
-- Row sets are JSON arrays of objects read by name. They are unnested from
-- an array, which the planner takes for about ten rows (jsonb_to_recordset
-- it takes for a hundred, and then it hashed whole tables rather than look
-- the batch's rows up). The batch's entries are looked up key by key
-- (LATERAL, a subquery the planner cannot flatten): with a join, a table
-- whose statistics lag its size was read whole to hash it, twice a batch
-- (8 ms a batch at 8,500 events; see docs/performance.md).

-- One batch's read, in one statement: the executions it names (every
-- incarnation of :ids, those presenting :stamps, and up their retry
-- chains), the events of :keys and, with :touch, the events those
-- executions touched, locked FOR NO KEY UPDATE in key order, skipping rows
-- another session holds (held, reported, never waited for); their items;
-- their holders; the presences and, with :evidence, the kept reports of
-- the executions on them; with :pending, the errors waiting for the
-- executions' claims; the errors already recorded under :dedupe.
-- name: LedgerLock
WITH RECURSIVE named AS (
  SELECT x.execution_id, x.root_execution_id FROM executions x
  WHERE x.n8n_id = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:ids AS jsonb))))
  OR (x.run_stamp <> '' AND x.run_stamp = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:stamps AS jsonb)))))
), chain (execution_id, depth) AS (
  SELECT execution_id, 0 FROM named
  UNION SELECT root_execution_id, 0 FROM named
  UNION SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)), 0
  UNION SELECT (SELECT x.retry_of FROM executions x WHERE x.execution_id = c.execution_id), c.depth + 1
  FROM chain c WHERE c.execution_id <> '' AND c.depth < 50
), ids AS MATERIALIZED (SELECT ARRAY(SELECT DISTINCT execution_id FROM chain WHERE execution_id <> '') AS ids
), keys AS MATERIALIZED (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:keys AS jsonb)))) AS j
  UNION SELECT ee.source, ee.event_id FROM event_executions ee
  WHERE (SELECT CAST(:touch AS boolean)) AND ee.execution_id = ANY(CAST((SELECT ids FROM ids) AS text[]))
), locked AS MATERIALIZED (
  SELECT w.* FROM (SELECT source, event_id FROM keys ORDER BY source, event_id) k
  CROSS JOIN LATERAL (SELECT w.source, w.event_id, w.status, w.holder_execution_id, w.version, w.review_reason,
    w.review_since, w.crm_ref, w.resolved_by, w.alerted, w.item_count, w.deliveries, w.fingerprint,
    w.first_workflow_id, w.last_delivery_id, w.last_presented_at, w.stale_alerted_at, w.created_at, w.updated_at,
    w.last_seen_at FROM webhook_events w WHERE w.source = k.source AND w.event_id = k.event_id
    FOR NO KEY UPDATE SKIP LOCKED) w
), items AS MATERIALIZED (
  SELECT i.* FROM locked l CROSS JOIN LATERAL (SELECT i.source, i.event_id, i.item, i.status, i.holder_execution_id,
    i.version, i.review_reason, i.review_since, i.crm_ref, i.resolved_by, i.created_at, i.updated_at
    FROM event_items i WHERE i.source = l.source AND i.event_id = l.event_id OFFSET 0) i
), execs AS (
  SELECT x.execution_id, x.n8n_id, x.incarnation, x.workflow_id, x.workflow_name, x.mode, x.retry_of,
  x.claimed_retry_of, x.root_execution_id, x.n8n_url, x.lineage_note, x.run_stamp, x.started_at, x.ended_at,
  x.checked_at, x.n8n_status, x.first_seen_at, x.last_seen_at, x.superseded_at
  FROM executions x WHERE x.execution_id = ANY(ARRAY(SELECT unnest(ids) FROM ids
    UNION SELECT holder_execution_id FROM locked UNION SELECT holder_execution_id FROM items))
)
SELECT (SELECT json_agg(l) FROM locked l) AS events,
  (SELECT json_agg(k) FROM (SELECT k.source, k.event_id FROM keys k
    CROSS JOIN LATERAL (SELECT FROM webhook_events w WHERE w.source = k.source AND w.event_id = k.event_id LIMIT 1) w
    WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.source = k.source AND l.event_id = k.event_id)) k) AS held,
  (SELECT json_agg(i) FROM items i) AS items,
  (SELECT json_agg(x) FROM execs x) AS executions,
  (SELECT json_agg(p) FROM (SELECT ee.source, ee.event_id, ee.execution_id, ee.role, ee.delivery, ee.acted,
    ee.delivery_id, ee.workflow_id, ee.class FROM locked l JOIN event_executions ee
    ON ee.source = l.source AND ee.event_id = l.event_id WHERE ee.execution_id = ANY(CAST((SELECT ids FROM ids) AS text[]))) p)
    AS presences,
  (SELECT json_agg(h) FROM (SELECT h.source, h.event_id, h.item, h.execution_id, h.kind, h.decision, h.version
    FROM locked l JOIN event_history h ON h.source = l.source AND h.event_id = l.event_id
    WHERE (SELECT CAST(:evidence AS boolean)) AND h.kind IN ('not_holder', 'contradiction')
    AND h.execution_id = ANY(CAST((SELECT ids FROM ids) AS text[]))) h) AS evidence,
  (SELECT json_agg(e) FROM (SELECT e.id, e.kind, e.execution_id, e.retry_of, e.root_execution_id, e.workflow_id,
    e.workflow_name, e.node, e.message, e.n8n_url FROM n8n_errors e
    WHERE (SELECT CAST(:pending AS boolean)) AND e.source IS NULL
    AND e.kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
    AND e.id = ANY(ARRAY(SELECT id FROM n8n_errors WHERE execution_id <> ''
      AND execution_id = ANY(CAST((SELECT ids FROM ids) AS text[]))
      UNION SELECT id FROM n8n_errors WHERE root_execution_id = ANY(CAST((SELECT ids FROM ids) AS text[]))))
    ORDER BY e.id) e) AS pending,
  (SELECT json_agg(e) FROM (SELECT e.id, e.dedupe_key, e.received_at, e.kind, e.execution_id, e.retry_of,
    e.root_execution_id, e.workflow_id, e.workflow_name, e.mode, e.node, e.message, e.http_code, e.n8n_url,
    e.payload, e.payload_truncated, e.payload_dropped, e.intake_note, e.source, e.event_id FROM n8n_errors e
    WHERE e.dedupe_key = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(:dedupe AS jsonb))))) e) AS errors

-- What a batch decided, in one statement: new entries inserted (a key
-- another session made since the lock fails here), the others updated as
-- they were locked (version), items after their events; the executions
-- (a new one inserted, so that two sessions never make one id twice), the
-- presences, the history, the alerts, the counters, the review waits, the
-- errors a claim linked and the lineage roots learned late.
-- name: LedgerWrite
WITH ev AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'status' AS status, j->>'holder_execution_id' AS holder,
  CAST(j->>'version' AS bigint) AS version, CAST(j->>'read_version' AS bigint) AS read_version,
  j->>'review_reason' AS review_reason, CAST(j->>'review_since' AS timestamptz) AS review_since, j->>'crm_ref' AS crm_ref,
  j->>'resolved_by' AS resolved_by, CAST(j->>'alerted' AS boolean) AS alerted, CAST(j->>'item_count' AS integer) AS item_count,
  CAST(j->>'deliveries' AS integer) AS deliveries, j->>'fingerprint' AS fingerprint,
  j->>'first_workflow_id' AS first_workflow_id, j->>'last_delivery_id' AS last_delivery_id,
  CAST(j->>'last_presented_at' AS timestamptz) AS last_presented_at,
  CAST(j->>'stale_alerted_at' AS timestamptz) AS stale_alerted_at, CAST(j->>'created_at' AS timestamptz) AS created_at,
  CAST(j->>'updated_at' AS timestamptz) AS updated_at, CAST(j->>'last_seen_at' AS timestamptz) AS last_seen_at
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:events AS jsonb)))) AS j
), events_new AS (
  INSERT INTO webhook_events (source, event_id, status, holder_execution_id, version, review_reason, review_since,
  crm_ref, resolved_by, alerted, item_count, deliveries, fingerprint, first_workflow_id, last_delivery_id,
  last_presented_at, stale_alerted_at, created_at, updated_at, last_seen_at)
  SELECT source, event_id, status, holder, version, review_reason, review_since, crm_ref, resolved_by, alerted,
  item_count, deliveries, fingerprint, first_workflow_id, last_delivery_id, last_presented_at, stale_alerted_at,
  created_at, updated_at, last_seen_at FROM ev WHERE read_version = 0 ORDER BY source, event_id
  RETURNING 1
), events_old AS (
  UPDATE webhook_events w SET status = r.status, holder_execution_id = r.holder, version = r.version,
  review_reason = r.review_reason, review_since = r.review_since, crm_ref = r.crm_ref, resolved_by = r.resolved_by,
  alerted = r.alerted, item_count = r.item_count, deliveries = r.deliveries, fingerprint = r.fingerprint,
  first_workflow_id = r.first_workflow_id, last_delivery_id = r.last_delivery_id,
  last_presented_at = r.last_presented_at, stale_alerted_at = r.stale_alerted_at, updated_at = r.updated_at,
  last_seen_at = r.last_seen_at
  FROM ev r WHERE r.read_version > 0 AND w.source = r.source AND w.event_id = r.event_id AND w.version = r.read_version
  RETURNING 1
), it AS (
  SELECT j->>'source' AS source, j->>'event_id' AS event_id, j->>'item' AS item, j->>'status' AS status,
  j->>'holder_execution_id' AS holder, CAST(j->>'version' AS bigint) AS version,
  CAST(j->>'read_version' AS bigint) AS read_version, j->>'review_reason' AS review_reason,
  CAST(j->>'review_since' AS timestamptz) AS review_since, j->>'crm_ref' AS crm_ref, j->>'resolved_by' AS resolved_by,
  CAST(j->>'created_at' AS timestamptz) AS created_at, CAST(j->>'updated_at' AS timestamptz) AS updated_at
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:items AS jsonb)))) AS j
), items_new AS (
  INSERT INTO event_items (source, event_id, item, status, holder_execution_id, version, review_reason, review_since,
  crm_ref, resolved_by, created_at, updated_at)
  SELECT source, event_id, item, status, holder, version, review_reason, review_since, crm_ref, resolved_by,
  created_at, updated_at FROM it WHERE read_version = 0 ORDER BY source, event_id, item
  RETURNING 1
), items_old AS (
  UPDATE event_items i SET status = r.status, holder_execution_id = r.holder, version = r.version,
  review_reason = r.review_reason, review_since = r.review_since, crm_ref = r.crm_ref, resolved_by = r.resolved_by,
  updated_at = r.updated_at
  FROM it r WHERE r.read_version > 0 AND i.source = r.source AND i.event_id = r.event_id AND i.item = r.item
  AND i.version = r.read_version
  RETURNING 1
), ex AS (
  SELECT j->>'execution_id' AS id, j->>'n8n_id' AS n8n_id, CAST(j->>'incarnation' AS integer) AS incarnation,
  j->>'workflow_id' AS workflow_id, j->>'workflow_name' AS workflow_name, j->>'mode' AS mode, j->>'retry_of' AS retry_of,
  j->>'claimed_retry_of' AS claimed_retry_of, j->>'root_execution_id' AS root, j->>'n8n_url' AS url,
  j->>'lineage_note' AS note, j->>'run_stamp' AS stamp, CAST(j->>'started_at' AS timestamptz) AS started_at,
  CAST(j->>'ended_at' AS timestamptz) AS ended_at, CAST(j->>'checked_at' AS timestamptz) AS checked_at,
  j->>'n8n_status' AS n8n_status, CAST(j->>'first_seen_at' AS timestamptz) AS first_seen_at,
  CAST(j->>'last_seen_at' AS timestamptz) AS last_seen_at, CAST(j->>'superseded_at' AS timestamptz) AS superseded_at,
  CAST(j->>'stored' AS boolean) AS stored
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:executions AS jsonb)))) AS j
), execs_new AS (
  INSERT INTO executions (execution_id, n8n_id, incarnation, workflow_id, workflow_name, mode, retry_of,
  claimed_retry_of, root_execution_id, n8n_url, lineage_note, run_stamp, started_at, ended_at, checked_at, n8n_status,
  first_seen_at, last_seen_at, superseded_at)
  SELECT id, n8n_id, incarnation, workflow_id, workflow_name, mode, retry_of, claimed_retry_of, root, url, note, stamp,
  started_at, ended_at, checked_at, n8n_status, first_seen_at, last_seen_at, superseded_at
  FROM ex WHERE NOT stored ORDER BY id
  RETURNING 1
), execs_old AS (
  UPDATE executions x SET workflow_id = r.workflow_id, workflow_name = r.workflow_name, mode = r.mode,
  retry_of = r.retry_of, claimed_retry_of = r.claimed_retry_of, root_execution_id = r.root, n8n_url = r.url,
  lineage_note = r.note, run_stamp = r.stamp, started_at = r.started_at, ended_at = r.ended_at,
  checked_at = r.checked_at, n8n_status = r.n8n_status, last_seen_at = r.last_seen_at,
  superseded_at = COALESCE(x.superseded_at, r.superseded_at)
  FROM ex r WHERE r.stored AND x.execution_id = r.id
  RETURNING 1
), presences AS (
  INSERT INTO event_executions (source, event_id, execution_id, role, delivery, acted, delivery_id, workflow_id, class,
  first_seen_at)
  SELECT j->>'source', j->>'event_id', j->>'execution_id', j->>'role', j->>'delivery', CAST(j->>'acted' AS boolean),
  j->>'delivery_id', j->>'workflow_id', j->>'class', CAST(:now AS timestamptz)
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:presences AS jsonb)))) AS j
  ORDER BY j->>'source', j->>'event_id', j->>'execution_id'
  ON CONFLICT (source, event_id, execution_id) DO UPDATE SET role = excluded.role, delivery = excluded.delivery,
  acted = excluded.acted, delivery_id = excluded.delivery_id, workflow_id = excluded.workflow_id, class = excluded.class
  RETURNING 1
), history AS (
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name, node,
  decision, delivery, class, status, actor, message, crm_ref, error_id, version)
  SELECT j->>'source', j->>'event_id', j->>'item', CAST(:now AS timestamptz), j->>'kind', j->>'execution_id',
  j->>'retry_of', j->>'workflow_id', j->>'workflow_name', j->>'node', j->>'decision', j->>'delivery', j->>'class',
  j->>'status', j->>'actor', j->>'message', j->>'crm_ref', CAST(j->>'error_id' AS bigint), CAST(j->>'version' AS bigint)
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:history AS jsonb)))) WITH ORDINALITY AS t(j, n) ORDER BY n
  RETURNING 1
), outbox_rows AS (
  INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state, last_error,
  alert_kind)
  SELECT CAST(:now AS timestamptz), CAST(j->>'due_at' AS timestamptz),
  j->>'thread_key', j->>'kind', j->>'source', j->>'event_id', CAST(j->>'error_id' AS bigint), j->>'payload',
  j->>'state', j->>'last_error', j->>'alert_kind'
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:outbox AS jsonb)))) WITH ORDINALITY AS t(j, n) ORDER BY n
  RETURNING 1
), waits AS (
  INSERT INTO resolution_times (resolved_at, source, seconds)
  SELECT CAST(:now AS timestamptz), j->>'source', CAST(j->>'seconds' AS double precision)
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:waits AS jsonb)))) AS j
  RETURNING 1
), links AS (
  UPDATE n8n_errors e SET source = j->'event'->>'source', event_id = j->'event'->>'event_id'
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:links AS jsonb)))) AS j
  WHERE e.id = CAST(j->>'id' AS bigint) AND e.source IS NULL
  RETURNING 1
), reroot_execs AS (
  UPDATE executions x SET root_execution_id = j->>'to'
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:reroots AS jsonb)))) AS j
  WHERE x.root_execution_id = j->>'from' AND x.execution_id NOT IN (SELECT id FROM ex)
  RETURNING 1
), reroot_errors AS (
  UPDATE n8n_errors e SET root_execution_id = j->>'to'
  FROM unnest(ARRAY(SELECT jsonb_array_elements(CAST(:reroots AS jsonb)))) AS j
  WHERE e.root_execution_id = j->>'from'
  RETURNING 1
), {{counters}}
SELECT 1
