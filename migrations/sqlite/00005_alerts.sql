-- As postgres/00005_alerts.sql, in SQLite's types.

-- +goose Up
ALTER TABLE outbox ADD COLUMN attempted_by TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN first_attempt_at TIMESTAMP;
ALTER TABLE outbox ADD COLUMN maybe_sent BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX outbox_resend ON outbox (created_at) WHERE state IN ('unconfigured', 'dead');

CREATE TABLE slack_channels (
    channel TEXT        PRIMARY KEY,
    next_at TIMESTAMP   NOT NULL
);

CREATE TABLE alert_groups (
    group_key    TEXT        PRIMARY KEY,
    kind         TEXT        NOT NULL,
    workflow_id  TEXT        NOT NULL,
    node         TEXT        NOT NULL,
    thread_key   TEXT        NOT NULL,
    opened_at    TIMESTAMP   NOT NULL,
    closes_at    TIMESTAMP   NOT NULL,
    reply_due_at TIMESTAMP
);
CREATE INDEX n8n_errors_group ON n8n_errors (kind, workflow_id, node, received_at) WHERE source IS NULL;

-- +goose Down
DROP INDEX n8n_errors_group;
DROP TABLE alert_groups;
DROP TABLE slack_channels;
DROP INDEX outbox_resend;
ALTER TABLE outbox DROP COLUMN maybe_sent;
ALTER TABLE outbox DROP COLUMN first_attempt_at;
ALTER TABLE outbox DROP COLUMN attempted_by;
