-- The ledger's two statements, as PostgreSQL's (postgres/sql/ledger.sql)
-- but for what SQLite lacks. No row locks: SQLite has one writer (the
-- store admits one write transaction at a time), so the read sees the
-- entries as the batch will write them and nothing is held elsewhere
-- (held is empty). No data-modifying CTEs: LedgerWrite is a statement a
-- table, run in one call (every parameter bound by name). JSON from
-- json_group_array(json_object(…)), each column named.

-- name: LedgerLock
WITH RECURSIVE named AS (
  SELECT x.execution_id, x.root_execution_id FROM executions x
  WHERE x.n8n_id IN (SELECT value FROM json_each(:ids))
  OR (x.run_stamp <> '' AND x.run_stamp IN (SELECT value FROM json_each(:stamps)))
), chain (execution_id, depth) AS (
  SELECT execution_id, 0 FROM named
  UNION SELECT root_execution_id, 0 FROM named
  UNION SELECT value, 0 FROM json_each(:ids)
  UNION SELECT x.retry_of, c.depth + 1 FROM chain c JOIN executions x ON x.execution_id = c.execution_id
  WHERE x.retry_of <> '' AND c.depth < 50
), ids AS (SELECT DISTINCT execution_id FROM chain WHERE execution_id <> ''
), keys AS (
  SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id FROM json_each(:keys) AS j
  UNION SELECT ee.source, ee.event_id FROM event_executions ee
  WHERE :touch AND ee.execution_id IN (SELECT execution_id FROM ids)
), locked AS MATERIALIZED (
  SELECT w.* FROM webhook_events w WHERE (w.source, w.event_id) IN (SELECT source, event_id FROM keys)
), items AS MATERIALIZED (
  SELECT i.* FROM event_items i WHERE (i.source, i.event_id) IN (SELECT source, event_id FROM locked)
)
SELECT (SELECT json_group_array(json_object('source', source, 'event_id', event_id, 'status', status,
    'holder_execution_id', holder_execution_id, 'version', version, 'review_reason', review_reason,
    'review_since', review_since, 'crm_ref', crm_ref, 'resolved_by', resolved_by, 'alerted', alerted,
    'item_count', item_count, 'deliveries', deliveries, 'fingerprint', fingerprint,
    'first_workflow_id', first_workflow_id, 'last_delivery_id', last_delivery_id,
    'last_presented_at', last_presented_at, 'stale_alerted_at', stale_alerted_at, 'created_at', created_at,
    'updated_at', updated_at, 'last_seen_at', last_seen_at)) FROM locked) AS events,
  NULL AS held,
  (SELECT json_group_array(json_object('source', source, 'event_id', event_id, 'item', item, 'status', status,
    'holder_execution_id', holder_execution_id, 'version', version, 'review_reason', review_reason,
    'review_since', review_since, 'crm_ref', crm_ref, 'resolved_by', resolved_by, 'created_at', created_at,
    'updated_at', updated_at)) FROM items) AS items,
  (SELECT json_group_array(json_object('execution_id', execution_id, 'n8n_id', n8n_id, 'incarnation', incarnation,
    'workflow_id', workflow_id, 'workflow_name', workflow_name, 'mode', mode, 'retry_of', retry_of,
    'claimed_retry_of', claimed_retry_of, 'root_execution_id', root_execution_id, 'n8n_url', n8n_url,
    'lineage_note', lineage_note, 'run_stamp', run_stamp, 'started_at', started_at, 'ended_at', ended_at,
    'checked_at', checked_at, 'n8n_status', n8n_status, 'first_seen_at', first_seen_at,
    'last_seen_at', last_seen_at, 'superseded_at', superseded_at))
    FROM executions WHERE execution_id IN (SELECT execution_id FROM ids)
    OR execution_id IN (SELECT holder_execution_id FROM locked UNION SELECT holder_execution_id FROM items))
    AS executions,
  (SELECT json_group_array(json_object('source', source, 'event_id', event_id, 'execution_id', execution_id,
    'role', role, 'delivery', delivery, 'acted', acted, 'delivery_id', delivery_id, 'workflow_id', workflow_id,
    'class', class)) FROM event_executions
    WHERE (source, event_id) IN (SELECT source, event_id FROM locked)
    AND execution_id IN (SELECT execution_id FROM ids)) AS presences,
  (SELECT json_group_array(json_object('source', source, 'event_id', event_id, 'item', item,
    'execution_id', execution_id, 'kind', kind, 'decision', decision, 'version', version)) FROM event_history
    WHERE :evidence AND (source, event_id) IN (SELECT source, event_id FROM locked)
    AND kind IN ('not_holder', 'contradiction') AND execution_id IN (SELECT execution_id FROM ids)) AS evidence,
  (SELECT json_group_array(json_object('id', id, 'kind', kind, 'execution_id', execution_id, 'retry_of', retry_of,
    'root_execution_id', root_execution_id, 'workflow_id', workflow_id, 'workflow_name', workflow_name,
    'node', node, 'message', message, 'n8n_url', n8n_url)) FROM (SELECT * FROM n8n_errors
    WHERE :pending AND +source IS NULL AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
    AND execution_id <> '' AND execution_id IN (SELECT execution_id FROM ids)
    UNION SELECT * FROM n8n_errors
    WHERE :pending AND +source IS NULL AND kind IN ('execution_error', 'found_by_reconcile', 'found_by_hook')
    AND root_execution_id IN (SELECT execution_id FROM ids) ORDER BY id)) AS pending,
  (SELECT json_group_array(json_object('id', id, 'dedupe_key', dedupe_key, 'received_at', received_at,
    'kind', kind, 'execution_id', execution_id, 'retry_of', retry_of, 'root_execution_id', root_execution_id,
    'workflow_id', workflow_id, 'workflow_name', workflow_name, 'mode', mode, 'node', node, 'message', message,
    'http_code', http_code, 'n8n_url', n8n_url, 'payload', payload, 'payload_truncated', payload_truncated,
    'payload_dropped', payload_dropped, 'intake_note', intake_note, 'source', source, 'event_id', event_id))
    FROM n8n_errors WHERE dedupe_key IN (SELECT value FROM json_each(:dedupe))) AS errors

-- name: LedgerWrite
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, version, review_reason, review_since,
  crm_ref, resolved_by, alerted, item_count, deliveries, fingerprint, first_workflow_id, last_delivery_id,
  last_presented_at, stale_alerted_at, created_at, updated_at, last_seen_at)
  SELECT j.value->>'$.source', j.value->>'$.event_id', j.value->>'$.status', j.value->>'$.holder_execution_id',
  j.value->>'$.version', j.value->>'$.review_reason', j.value->>'$.review_since', j.value->>'$.crm_ref',
  j.value->>'$.resolved_by', j.value->>'$.alerted', j.value->>'$.item_count', j.value->>'$.deliveries',
  j.value->>'$.fingerprint', j.value->>'$.first_workflow_id', j.value->>'$.last_delivery_id',
  j.value->>'$.last_presented_at', j.value->>'$.stale_alerted_at', j.value->>'$.created_at',
  j.value->>'$.updated_at', j.value->>'$.last_seen_at'
  FROM json_each(:events) AS j WHERE j.value->>'$.read_version' = 0;
UPDATE webhook_events AS w SET status = r.value->>'$.status', holder_execution_id = r.value->>'$.holder_execution_id',
  version = r.value->>'$.version', review_reason = r.value->>'$.review_reason',
  review_since = r.value->>'$.review_since', crm_ref = r.value->>'$.crm_ref', resolved_by = r.value->>'$.resolved_by',
  alerted = r.value->>'$.alerted', item_count = r.value->>'$.item_count', deliveries = r.value->>'$.deliveries',
  fingerprint = r.value->>'$.fingerprint', first_workflow_id = r.value->>'$.first_workflow_id',
  last_delivery_id = r.value->>'$.last_delivery_id', last_presented_at = r.value->>'$.last_presented_at',
  stale_alerted_at = r.value->>'$.stale_alerted_at', updated_at = r.value->>'$.updated_at',
  last_seen_at = r.value->>'$.last_seen_at'
  FROM json_each(:events) AS r WHERE r.value->>'$.read_version' > 0 AND w.source = r.value->>'$.source'
  AND w.event_id = r.value->>'$.event_id' AND w.version = r.value->>'$.read_version';
INSERT INTO event_items (source, event_id, item, status, holder_execution_id, version, review_reason, review_since,
  crm_ref, resolved_by, created_at, updated_at)
  SELECT j.value->>'$.source', j.value->>'$.event_id', j.value->>'$.item', j.value->>'$.status',
  j.value->>'$.holder_execution_id', j.value->>'$.version', j.value->>'$.review_reason', j.value->>'$.review_since',
  j.value->>'$.crm_ref', j.value->>'$.resolved_by', j.value->>'$.created_at', j.value->>'$.updated_at'
  FROM json_each(:items) AS j WHERE j.value->>'$.read_version' = 0;
UPDATE event_items AS i SET status = r.value->>'$.status', holder_execution_id = r.value->>'$.holder_execution_id',
  version = r.value->>'$.version', review_reason = r.value->>'$.review_reason',
  review_since = r.value->>'$.review_since', crm_ref = r.value->>'$.crm_ref', resolved_by = r.value->>'$.resolved_by',
  updated_at = r.value->>'$.updated_at'
  FROM json_each(:items) AS r WHERE r.value->>'$.read_version' > 0 AND i.source = r.value->>'$.source'
  AND i.event_id = r.value->>'$.event_id' AND i.item = r.value->>'$.item' AND i.version = r.value->>'$.read_version';
INSERT INTO executions (execution_id, n8n_id, incarnation, workflow_id, workflow_name, mode, retry_of,
  claimed_retry_of, root_execution_id, n8n_url, lineage_note, run_stamp, started_at, ended_at, checked_at, n8n_status,
  first_seen_at, last_seen_at, superseded_at)
  SELECT j.value->>'$.execution_id', j.value->>'$.n8n_id', j.value->>'$.incarnation', j.value->>'$.workflow_id',
  j.value->>'$.workflow_name', j.value->>'$.mode', j.value->>'$.retry_of', j.value->>'$.claimed_retry_of',
  j.value->>'$.root_execution_id', j.value->>'$.n8n_url', j.value->>'$.lineage_note', j.value->>'$.run_stamp',
  j.value->>'$.started_at', j.value->>'$.ended_at', j.value->>'$.checked_at', j.value->>'$.n8n_status',
  j.value->>'$.first_seen_at', j.value->>'$.last_seen_at', j.value->>'$.superseded_at'
  FROM json_each(:executions) AS j WHERE NOT (j.value->>'$.stored');
UPDATE executions AS x SET workflow_id = r.value->>'$.workflow_id', workflow_name = r.value->>'$.workflow_name',
  mode = r.value->>'$.mode', retry_of = r.value->>'$.retry_of', claimed_retry_of = r.value->>'$.claimed_retry_of',
  root_execution_id = r.value->>'$.root_execution_id', n8n_url = r.value->>'$.n8n_url',
  lineage_note = r.value->>'$.lineage_note', run_stamp = r.value->>'$.run_stamp',
  started_at = r.value->>'$.started_at', ended_at = r.value->>'$.ended_at', checked_at = r.value->>'$.checked_at',
  n8n_status = r.value->>'$.n8n_status', last_seen_at = r.value->>'$.last_seen_at',
  superseded_at = COALESCE(x.superseded_at, r.value->>'$.superseded_at')
  FROM json_each(:executions) AS r WHERE r.value->>'$.stored' AND x.execution_id = r.value->>'$.execution_id';
INSERT INTO event_executions (source, event_id, execution_id, role, delivery, acted, delivery_id, workflow_id, class,
  first_seen_at)
  SELECT j.value->>'$.source', j.value->>'$.event_id', j.value->>'$.execution_id', j.value->>'$.role',
  j.value->>'$.delivery', j.value->>'$.acted', j.value->>'$.delivery_id', j.value->>'$.workflow_id',
  j.value->>'$.class', :now
  FROM json_each(:presences) AS j WHERE true
  ON CONFLICT (source, event_id, execution_id) DO UPDATE SET role = excluded.role, delivery = excluded.delivery,
  acted = excluded.acted, delivery_id = excluded.delivery_id, workflow_id = excluded.workflow_id, class = excluded.class;
INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name, node,
  decision, delivery, class, status, actor, message, crm_ref, error_id, version)
  SELECT j.value->>'$.source', j.value->>'$.event_id', j.value->>'$.item', :now, j.value->>'$.kind',
  j.value->>'$.execution_id', j.value->>'$.retry_of', j.value->>'$.workflow_id', j.value->>'$.workflow_name',
  j.value->>'$.node', j.value->>'$.decision', j.value->>'$.delivery', j.value->>'$.class', j.value->>'$.status',
  j.value->>'$.actor', j.value->>'$.message', j.value->>'$.crm_ref', j.value->>'$.error_id', j.value->>'$.version'
  FROM json_each(:history) AS j ORDER BY j.key;
INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state, last_error,
  alert_kind)
  SELECT :now, j.value->>'$.due_at',
  j.value->>'$.thread_key', j.value->>'$.kind', j.value->>'$.source', j.value->>'$.event_id',
  j.value->>'$.error_id', j.value->>'$.payload', j.value->>'$.state', j.value->>'$.last_error',
  j.value->>'$.alert_kind'
  FROM json_each(:outbox) AS j ORDER BY j.key;
INSERT INTO resolution_times (resolved_at, source, seconds)
  SELECT :now, j.value->>'$.source', j.value->>'$.seconds' FROM json_each(:waits) AS j;
UPDATE n8n_errors SET source = r.value->>'$.event.source', event_id = r.value->>'$.event.event_id'
  FROM json_each(:links) AS r WHERE n8n_errors.id = r.value->>'$.id' AND +n8n_errors.source IS NULL;
UPDATE executions SET root_execution_id = r.value->>'$.to' FROM json_each(:reroots) AS r
  WHERE executions.root_execution_id = r.value->>'$.from'
  AND executions.execution_id NOT IN (SELECT j.value->>'$.execution_id' FROM json_each(:executions) AS j);
UPDATE n8n_errors SET root_execution_id = r.value->>'$.to' FROM json_each(:reroots) AS r
  WHERE n8n_errors.root_execution_id = r.value->>'$.from';
INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT :hour, j.value->>'$.source', j.value->>'$.workflow_id', j.value->>'$.metric', :shard, j.value->>'$.n'
  FROM json_each(:counters) AS j WHERE true
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n
