-- Why an event was delivered again: the sender's delivery id, the workflow
-- that presented it and the class of the redelivery, with each claim.

-- +goose Up
ALTER TABLE event_executions
    ADD COLUMN delivery_id text NOT NULL DEFAULT '',
    ADD COLUMN workflow_id text NOT NULL DEFAULT '',
    ADD COLUMN class       text NOT NULL DEFAULT '';
ALTER TABLE event_history ADD COLUMN class text NOT NULL DEFAULT '';
CREATE INDEX event_executions_presenters ON event_executions (source, event_id, first_seen_at) WHERE role = 'claim';

-- +goose Down
DROP INDEX event_executions_presenters;
ALTER TABLE event_history DROP COLUMN class;
ALTER TABLE event_executions DROP COLUMN class, DROP COLUMN workflow_id, DROP COLUMN delivery_id;
