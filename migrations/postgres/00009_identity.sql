-- An execution is who n8n says it is. n8n's ids start again after a restore
-- or on a new database: the service keeps the first execution under the id
-- n8n gave and each later one under the id with "~" and a count (31~2).
-- n8n_id is the id n8n gave (with the instance's qualifier); superseded_at
-- marks an execution that a later one with the same n8n id replaced.
-- started_at is n8n's own start time (its API or its hooks), ended_at when
-- n8n said it finished (not waiting), checked_at when n8n last vouched for
-- it. hook_reports counts what n8n's execution hooks reported of it.

-- +goose Up
ALTER TABLE executions
    ADD COLUMN n8n_id        text        NOT NULL DEFAULT '',
    ADD COLUMN incarnation   integer     NOT NULL DEFAULT 1,
    ADD COLUMN superseded_at timestamptz,
    ADD COLUMN started_at    timestamptz,
    ADD COLUMN ended_at      timestamptz,
    ADD COLUMN n8n_status    text        NOT NULL DEFAULT '',
    ADD COLUMN checked_at    timestamptz,
    ADD COLUMN hook_reports  integer     NOT NULL DEFAULT 0;
UPDATE executions SET n8n_id = execution_id;
CREATE INDEX executions_current ON executions (n8n_id) WHERE superseded_at IS NULL;

-- +goose Down
DROP INDEX executions_current;
ALTER TABLE executions DROP COLUMN hook_reports, DROP COLUMN checked_at, DROP COLUMN n8n_status,
    DROP COLUMN ended_at, DROP COLUMN started_at, DROP COLUMN superseded_at, DROP COLUMN incarnation,
    DROP COLUMN n8n_id;
