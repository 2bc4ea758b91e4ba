-- Each entry's history (event_history).
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: HistoryBatchInsertClaims
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.workflow_id' AS workflow_id,
  j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.node' AS node, j.value->>'$.decision' AS decision,
  j.value->>'$.delivery' AS delivery, j.value->>'$.class' AS class, j.value->>'$.status' AS status,
  j.value->>'$.message' AS message, j.value->>'$.retry_of' AS retry_of FROM json_each(:history) AS j)
  INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref)
  SELECT source, event_id, '', :now, 'claim', execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, '', message, '' FROM r

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: HistoryBatchInsertErrors
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.retry_of' AS retry_of,
  j.value->>'$.workflow_id' AS workflow_id, j.value->>'$.workflow_name' AS workflow_name, j.value->>'$.node' AS node,
  j.value->>'$.decision' AS decision, j.value->>'$.message' AS message, j.value->>'$.error_id' AS error_id
  FROM json_each(:history) AS j)
INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  SELECT source, event_id, '', :now, 'error', execution_id, retry_of, workflow_id, workflow_name, node, decision, '',
  '', '', '', message, '', error_id FROM r

-- SQLite: each row set is one JSON array of objects, read by name.
-- name: HistoryBatchInsertOutcomes
WITH r AS (SELECT j.value->>'$.source' AS source, j.value->>'$.event_id' AS event_id,
  j.value->>'$.execution_id' AS execution_id, j.value->>'$.decision' AS decision, j.value->>'$.status' AS status,
  j.value->>'$.message' AS message, j.value->>'$.crm_ref' AS crm_ref, j.value->>'$.item' AS item,
  j.value->>'$.retry_of' AS retry_of FROM json_each(:history) AS j)
INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name,
  node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  SELECT source, event_id, item, :now, 'outcome', execution_id, retry_of, '', '', '', decision, '', '', status, '',
  message,
  crm_ref, NULL FROM r
