-- Decide once, as in postgres/00010_decide_once.sql.

-- +goose Up
ALTER TABLE webhook_events ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE webhook_events ADD COLUMN resolved_by TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN alerted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_events ADD COLUMN review_since TIMESTAMP;
ALTER TABLE event_items ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE event_items ADD COLUMN resolved_by TEXT NOT NULL DEFAULT '';
ALTER TABLE event_items ADD COLUMN review_since TIMESTAMP;
ALTER TABLE executions ADD COLUMN run_stamp TEXT NOT NULL DEFAULT '';
ALTER TABLE executions DROP COLUMN hook_reports;
CREATE INDEX executions_stamp ON executions (run_stamp) WHERE run_stamp <> '';
-- A lineage learned late moves every error rooted at an execution, linked
-- or not.
DROP INDEX n8n_errors_unlinked_root;
CREATE INDEX n8n_errors_root ON n8n_errors (root_execution_id);
-- A batch reads every incarnation of the ids it names.
DROP INDEX executions_current;
CREATE INDEX executions_n8n_id ON executions (n8n_id);
ALTER TABLE event_history ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

UPDATE webhook_events SET alerted = 1
  WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.kind = 'alert'
  AND o.thread_key = 'event:' || webhook_events.source || '/' || webhook_events.event_id);
UPDATE webhook_events SET resolved_by = COALESCE((SELECT CASE WHEN h.kind = 'resolution' THEN h.actor ELSE '' END
  FROM event_history h WHERE h.source = webhook_events.source AND h.event_id = webhook_events.event_id AND h.item = ''
  AND h.kind IN ('resolution', 'outcome') ORDER BY h.id DESC LIMIT 1), '')
  WHERE status IN ('done', 'failed');
UPDATE event_items SET resolved_by = COALESCE((SELECT CASE WHEN h.kind = 'resolution' THEN h.actor ELSE '' END
  FROM event_history h WHERE h.source = event_items.source AND h.event_id = event_items.event_id
  AND h.item = event_items.item AND h.kind IN ('resolution', 'outcome') ORDER BY h.id DESC LIMIT 1), '')
  WHERE status IN ('done', 'failed');
UPDATE webhook_events SET review_since = (SELECT h.at FROM event_history h
  WHERE h.source = webhook_events.source AND h.event_id = webhook_events.event_id
  AND ((h.kind = 'outcome' AND h.decision = 'unknown') OR h.kind = 'error') ORDER BY h.id DESC LIMIT 1)
  WHERE review_reason <> '';

-- +goose Down
ALTER TABLE event_history DROP COLUMN version;
DROP INDEX executions_n8n_id;
CREATE INDEX executions_current ON executions (n8n_id) WHERE superseded_at IS NULL;
DROP INDEX n8n_errors_root;
CREATE INDEX n8n_errors_unlinked_root ON n8n_errors (root_execution_id) WHERE source IS NULL;
DROP INDEX executions_stamp;
ALTER TABLE executions ADD COLUMN hook_reports INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions DROP COLUMN run_stamp;
ALTER TABLE event_items DROP COLUMN review_since;
ALTER TABLE event_items DROP COLUMN resolved_by;
ALTER TABLE event_items DROP COLUMN version;
ALTER TABLE webhook_events DROP COLUMN review_since;
ALTER TABLE webhook_events DROP COLUMN alerted;
ALTER TABLE webhook_events DROP COLUMN resolved_by;
ALTER TABLE webhook_events DROP COLUMN version;
