-- What n8n told us went wrong, the alerts about it, and the state that
-- background jobs share between instances.

-- +goose Up
-- dedupe_key makes the intake idempotent: exec:<id> for an execution, test:<id>
-- for the editor's test payload, sha256:<hex> for a payload without an id.
-- (source, event_id) is the event it was linked to, if any.
CREATE TABLE n8n_errors (
    id                bigserial   PRIMARY KEY,
    dedupe_key        text        NOT NULL UNIQUE,
    received_at       timestamptz NOT NULL DEFAULT now(),
    kind              text        NOT NULL,
    execution_id      text        NOT NULL DEFAULT '',
    retry_of          text        NOT NULL DEFAULT '',
    root_execution_id text        NOT NULL DEFAULT '',
    workflow_id       text        NOT NULL DEFAULT '',
    workflow_name     text        NOT NULL DEFAULT '',
    mode              text        NOT NULL DEFAULT '',
    node              text        NOT NULL DEFAULT '',
    message           text        NOT NULL DEFAULT '',
    http_code         text        NOT NULL DEFAULT '',
    n8n_url           text        NOT NULL DEFAULT '',
    payload           text        NOT NULL DEFAULT '',
    payload_truncated boolean     NOT NULL DEFAULT false,
    payload_dropped   boolean     NOT NULL DEFAULT false,
    source            text,
    event_id          text,
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE SET NULL
);
CREATE INDEX n8n_errors_execution ON n8n_errors (execution_id) WHERE execution_id <> '';
CREATE INDEX n8n_errors_unlinked_root ON n8n_errors (root_execution_id) WHERE source IS NULL;
CREATE INDEX n8n_errors_event ON n8n_errors (source, event_id);
CREATE INDEX n8n_errors_received ON n8n_errors (received_at);

-- One row per message to send. thread_key groups an event's (or an unlinked
-- error's) messages: they are sent in id order, one at a time.
CREATE TABLE outbox (
    id          bigserial   PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    due_at      timestamptz NOT NULL DEFAULT now(),
    thread_key  text        NOT NULL,
    kind        text        NOT NULL,
    source      text        NOT NULL DEFAULT '',
    event_id    text        NOT NULL DEFAULT '',
    error_id    bigint,
    payload     text        NOT NULL,
    state       text        NOT NULL DEFAULT 'pending',
    attempts    integer     NOT NULL DEFAULT 0,
    lease_owner text        NOT NULL DEFAULT '',
    lease_until timestamptz,
    last_error  text        NOT NULL DEFAULT '',
    sent_at     timestamptz,
    channel     text        NOT NULL DEFAULT '',
    ts          text        NOT NULL DEFAULT ''
);
CREATE INDEX outbox_open ON outbox (due_at, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_thread ON outbox (thread_key, id);
CREATE INDEX outbox_event ON outbox (source, event_id) WHERE source <> '';

-- The first message of each thread: follow-ups reply to it and update it.
CREATE TABLE slack_threads (
    thread_key     text        PRIMARY KEY,
    channel        text        NOT NULL,
    ts             text        NOT NULL,
    root_outbox_id bigint      NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE service_state (
    name       text        PRIMARY KEY,
    value      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A lease per background job, so that one of several instances runs it.
CREATE TABLE job_leases (
    name        text        PRIMARY KEY,
    owner       text        NOT NULL,
    lease_until timestamptz NOT NULL
);

-- +goose Down
DROP TABLE job_leases;
DROP TABLE service_state;
DROP TABLE slack_threads;
DROP TABLE outbox;
DROP TABLE n8n_errors;
