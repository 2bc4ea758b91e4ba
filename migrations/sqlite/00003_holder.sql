-- One holder at a time, as in postgres/00003_holder.sql.

-- +goose Up
ALTER TABLE executions ADD COLUMN claimed_retry_of TEXT NOT NULL DEFAULT '';
ALTER TABLE event_executions ADD COLUMN acted BOOLEAN NOT NULL DEFAULT 0;
ALTER TABLE event_history ADD COLUMN crm_ref TEXT NOT NULL DEFAULT '';
UPDATE event_executions SET acted = 1 WHERE role = 'claim';

-- +goose Down
ALTER TABLE event_history DROP COLUMN crm_ref;
ALTER TABLE event_executions DROP COLUMN acted;
ALTER TABLE executions DROP COLUMN claimed_retry_of;
