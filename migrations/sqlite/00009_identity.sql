-- Execution identity across n8n restores, as in postgres/00009_identity.sql.

-- +goose Up
ALTER TABLE executions ADD COLUMN n8n_id TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 1;
ALTER TABLE executions ADD COLUMN superseded_at TIMESTAMP;
ALTER TABLE executions ADD COLUMN started_at TIMESTAMP;
ALTER TABLE executions ADD COLUMN ended_at TIMESTAMP;
ALTER TABLE executions ADD COLUMN n8n_status TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN checked_at TIMESTAMP;
ALTER TABLE executions ADD COLUMN hook_reports INTEGER NOT NULL DEFAULT 0;
UPDATE executions SET n8n_id = execution_id;
CREATE INDEX executions_current ON executions (n8n_id) WHERE superseded_at IS NULL;

-- +goose Down
DROP INDEX executions_current;
ALTER TABLE executions DROP COLUMN hook_reports;
ALTER TABLE executions DROP COLUMN checked_at;
ALTER TABLE executions DROP COLUMN n8n_status;
ALTER TABLE executions DROP COLUMN ended_at;
ALTER TABLE executions DROP COLUMN started_at;
ALTER TABLE executions DROP COLUMN superseded_at;
ALTER TABLE executions DROP COLUMN incarnation;
ALTER TABLE executions DROP COLUMN n8n_id;
