-- As postgres/00002_errors_outbox.sql, in SQLite's types.

-- +goose Up
-- dedupe_key makes the intake idempotent: exec:<id> for an execution, test:<id>
-- for the editor's test payload, sha256:<hex> for a payload without an id.
-- (source, event_id) is the event it was linked to, if any.
CREATE TABLE n8n_errors (
    id                INTEGER     PRIMARY KEY AUTOINCREMENT,
    dedupe_key        TEXT        NOT NULL UNIQUE,
    received_at       TIMESTAMP   NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    kind              TEXT        NOT NULL,
    execution_id      TEXT        NOT NULL DEFAULT '',
    retry_of          TEXT        NOT NULL DEFAULT '',
    root_execution_id TEXT        NOT NULL DEFAULT '',
    workflow_id       TEXT        NOT NULL DEFAULT '',
    workflow_name     TEXT        NOT NULL DEFAULT '',
    mode              TEXT        NOT NULL DEFAULT '',
    node              TEXT        NOT NULL DEFAULT '',
    message           TEXT        NOT NULL DEFAULT '',
    http_code         TEXT        NOT NULL DEFAULT '',
    n8n_url           TEXT        NOT NULL DEFAULT '',
    payload           TEXT        NOT NULL DEFAULT '',
    payload_truncated BOOLEAN     NOT NULL DEFAULT false,
    payload_dropped   BOOLEAN     NOT NULL DEFAULT false,
    source            TEXT,
    event_id          TEXT,
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE SET NULL
);
CREATE INDEX n8n_errors_execution ON n8n_errors (execution_id) WHERE execution_id <> '';
CREATE INDEX n8n_errors_unlinked_root ON n8n_errors (root_execution_id) WHERE source IS NULL;
CREATE INDEX n8n_errors_event ON n8n_errors (source, event_id);
CREATE INDEX n8n_errors_received ON n8n_errors (received_at);

-- One row per message to send. thread_key groups an event's (or an unlinked
-- error's) messages: they are sent in id order, one at a time.
CREATE TABLE outbox (
    id          INTEGER     PRIMARY KEY AUTOINCREMENT,
    created_at  TIMESTAMP   NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    due_at      TIMESTAMP   NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    thread_key  TEXT        NOT NULL,
    kind        TEXT        NOT NULL,
    source      TEXT        NOT NULL DEFAULT '',
    event_id    TEXT        NOT NULL DEFAULT '',
    error_id    INTEGER,
    payload     TEXT        NOT NULL,
    state       TEXT        NOT NULL DEFAULT 'pending',
    attempts    INTEGER     NOT NULL DEFAULT 0,
    lease_owner TEXT        NOT NULL DEFAULT '',
    lease_until TIMESTAMP,
    last_error  TEXT        NOT NULL DEFAULT '',
    sent_at     TIMESTAMP,
    channel     TEXT        NOT NULL DEFAULT '',
    ts          TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX outbox_open ON outbox (due_at, id) WHERE state IN ('pending', 'sending');
CREATE INDEX outbox_thread ON outbox (thread_key, id);
CREATE INDEX outbox_event ON outbox (source, event_id) WHERE source <> '';

-- The first message of each thread: follow-ups reply to it and update it.
CREATE TABLE slack_threads (
    thread_key     TEXT        PRIMARY KEY,
    channel        TEXT        NOT NULL,
    ts             TEXT        NOT NULL,
    root_outbox_id INTEGER     NOT NULL,
    created_at     TIMESTAMP   NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE service_state (
    name       TEXT        PRIMARY KEY,
    value      TEXT        NOT NULL,
    updated_at TIMESTAMP   NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- A lease per background job, so that one of several instances runs it.
CREATE TABLE job_leases (
    name        TEXT        PRIMARY KEY,
    owner       TEXT        NOT NULL,
    lease_until TIMESTAMP   NOT NULL
);

-- +goose Down
DROP TABLE job_leases;
DROP TABLE service_state;
DROP TABLE slack_threads;
DROP TABLE outbox;
DROP TABLE n8n_errors;
