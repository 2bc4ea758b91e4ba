-- Decide once: what the decision table reads of an entry, kept on the entry
-- itself, and the run stamp that carries an execution's identity.
--
-- version changes with every transition of an entry (status, holder,
-- review, CRM reference): a person's form carries the version it showed.
-- resolved_by is the person whose resolution settled it last ('' when an
-- execution's report did). alerted says that people were told about the
-- event (its thread is open). review_since is when it began to wait for
-- its review reason. executions.run_stamp is the stamp the execution
-- presents. event_history.version is the event's version after the line.

-- +goose Up
ALTER TABLE webhook_events
    ADD COLUMN version      bigint  NOT NULL DEFAULT 1,
    ADD COLUMN resolved_by  text    NOT NULL DEFAULT '',
    ADD COLUMN alerted      boolean NOT NULL DEFAULT false,
    ADD COLUMN review_since timestamptz;
ALTER TABLE event_items
    ADD COLUMN version      bigint NOT NULL DEFAULT 1,
    ADD COLUMN resolved_by  text   NOT NULL DEFAULT '',
    ADD COLUMN review_since timestamptz;
ALTER TABLE executions ADD COLUMN run_stamp text NOT NULL DEFAULT '';
ALTER TABLE executions DROP COLUMN hook_reports;
CREATE INDEX executions_stamp ON executions (run_stamp) WHERE run_stamp <> '';
-- A lineage learned late moves every error rooted at an execution, linked
-- or not.
DROP INDEX n8n_errors_unlinked_root;
CREATE INDEX n8n_errors_root ON n8n_errors (root_execution_id);
-- A batch reads every incarnation of the ids it names.
DROP INDEX executions_current;
CREATE INDEX executions_n8n_id ON executions (n8n_id);
ALTER TABLE event_history ADD COLUMN version bigint NOT NULL DEFAULT 0;

UPDATE webhook_events w SET alerted = true
  WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.kind = 'alert' AND o.thread_key = 'event:' || w.source || '/' || w.event_id);
UPDATE webhook_events w SET resolved_by = COALESCE((SELECT CASE WHEN h.kind = 'resolution' THEN h.actor ELSE '' END
  FROM event_history h WHERE h.source = w.source AND h.event_id = w.event_id AND h.item = ''
  AND h.kind IN ('resolution', 'outcome') ORDER BY h.id DESC LIMIT 1), '')
  WHERE w.status IN ('done', 'failed');
UPDATE event_items i SET resolved_by = COALESCE((SELECT CASE WHEN h.kind = 'resolution' THEN h.actor ELSE '' END
  FROM event_history h WHERE h.source = i.source AND h.event_id = i.event_id AND h.item = i.item
  AND h.kind IN ('resolution', 'outcome') ORDER BY h.id DESC LIMIT 1), '')
  WHERE i.status IN ('done', 'failed');
UPDATE webhook_events w SET review_since = (SELECT h.at FROM event_history h
  WHERE h.source = w.source AND h.event_id = w.event_id AND ((h.kind = 'outcome' AND h.decision = 'unknown') OR h.kind = 'error')
  ORDER BY h.id DESC LIMIT 1)
  WHERE w.review_reason <> '';

-- +goose Down
ALTER TABLE event_history DROP COLUMN version;
DROP INDEX executions_n8n_id;
CREATE INDEX executions_current ON executions (n8n_id) WHERE superseded_at IS NULL;
DROP INDEX n8n_errors_root;
CREATE INDEX n8n_errors_unlinked_root ON n8n_errors (root_execution_id) WHERE source IS NULL;
DROP INDEX executions_stamp;
ALTER TABLE executions ADD COLUMN hook_reports integer NOT NULL DEFAULT 0;
ALTER TABLE executions DROP COLUMN run_stamp;
ALTER TABLE event_items DROP COLUMN review_since, DROP COLUMN resolved_by, DROP COLUMN version;
ALTER TABLE webhook_events DROP COLUMN review_since, DROP COLUMN alerted, DROP COLUMN resolved_by, DROP COLUMN version;
