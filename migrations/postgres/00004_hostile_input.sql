-- What the intake changed to record an error: bytes PostgreSQL cannot store
-- replaced, a body cut at the size limit. Shown on the error's page.

-- +goose Up
ALTER TABLE n8n_errors ADD COLUMN IF NOT EXISTS intake_note text NOT NULL DEFAULT '';
-- Retention asks whether any history line still points at an error.
CREATE INDEX IF NOT EXISTS event_history_error ON event_history (error_id) WHERE error_id IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS event_history_error;
ALTER TABLE n8n_errors DROP COLUMN IF EXISTS intake_note;
