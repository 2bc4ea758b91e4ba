-- As postgres/00004_hostile_input.sql, in SQLite's types.

-- +goose Up
ALTER TABLE n8n_errors ADD COLUMN intake_note TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS event_history_error ON event_history (error_id) WHERE error_id IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS event_history_error;
ALTER TABLE n8n_errors DROP COLUMN intake_note;
