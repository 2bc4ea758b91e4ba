-- Why an event was delivered again, as in postgres/00007_redelivery_class.sql.

-- +goose Up
ALTER TABLE event_executions ADD COLUMN delivery_id TEXT NOT NULL DEFAULT '';
ALTER TABLE event_executions ADD COLUMN workflow_id TEXT NOT NULL DEFAULT '';
ALTER TABLE event_executions ADD COLUMN class TEXT NOT NULL DEFAULT '';
ALTER TABLE event_history ADD COLUMN class TEXT NOT NULL DEFAULT '';
CREATE INDEX event_executions_presenters ON event_executions (source, event_id, first_seen_at) WHERE role = 'claim';

-- +goose Down
DROP INDEX event_executions_presenters;
ALTER TABLE event_history DROP COLUMN class;
ALTER TABLE event_executions DROP COLUMN class;
ALTER TABLE event_executions DROP COLUMN workflow_id;
ALTER TABLE event_executions DROP COLUMN delivery_id;
