-- Alerts that arrive once, never storm and are never lost for their size.

-- +goose Up
-- outbox.attempted_by names the worker that last attempted the row; it stays
-- after the lease ends (lease_owner is cleared), and a worker that takes over
-- an expired lease records the one that died in it.
-- outbox.first_attempt_at is when the first attempt began: where to start
-- looking in the channel's history for a message Slack may have posted.
-- outbox.maybe_sent says that an attempt ended without knowing whether Slack
-- posted the message (a timeout, a reset connection, a worker that died
-- mid-send): the next attempt looks before it posts again.
ALTER TABLE outbox ADD COLUMN attempted_by text NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN first_attempt_at timestamptz;
ALTER TABLE outbox ADD COLUMN maybe_sent boolean NOT NULL DEFAULT false;
CREATE INDEX outbox_resend ON outbox (created_at) WHERE state IN ('unconfigured', 'dead');

-- The next moment a message may go to each Slack channel, shared by every
-- instance: a conditional update claims the slot; a 429 moves it to the end
-- of Retry-After.
CREATE TABLE slack_channels (
    channel text        PRIMARY KEY,
    next_at timestamptz NOT NULL
);

-- Errors linked to no event, grouped by (kind, workflow, node): the first of
-- a repeat interval opens a thread, the others are counted in it.
-- group_key is a hash of the three; reply_due_at is when the thread's last
-- counted reply was due, so that replies are spaced.
CREATE TABLE alert_groups (
    group_key    text        PRIMARY KEY,
    kind         text        NOT NULL,
    workflow_id  text        NOT NULL,
    node         text        NOT NULL,
    thread_key   text        NOT NULL,
    opened_at    timestamptz NOT NULL,
    closes_at    timestamptz NOT NULL,
    reply_due_at timestamptz
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
