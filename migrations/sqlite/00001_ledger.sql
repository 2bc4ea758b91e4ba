-- The ledger, as in postgres/00001_ledger.sql. Times are TEXT in one fixed
-- UTC format (2006-01-02T15:04:05.000000Z) so that they compare as strings;
-- the store always writes them itself, the defaults are a fallback.

-- +goose Up
CREATE TABLE webhook_events (
    source              TEXT      NOT NULL,
    event_id            TEXT      NOT NULL,
    status              TEXT      NOT NULL DEFAULT 'processing',
    created_at          TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at          TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    holder_execution_id TEXT      NOT NULL DEFAULT '',
    deliveries          INTEGER   NOT NULL DEFAULT 0,
    item_count          INTEGER   NOT NULL DEFAULT 0,
    fingerprint         TEXT      NOT NULL DEFAULT '',
    crm_ref             TEXT      NOT NULL DEFAULT '',
    review_reason       TEXT      NOT NULL DEFAULT '',
    last_seen_at        TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    stale_alerted_at    TIMESTAMP,
    PRIMARY KEY (source, event_id)
);
CREATE INDEX webhook_events_activity ON webhook_events (last_seen_at DESC, source DESC, event_id DESC);
CREATE INDEX webhook_events_status ON webhook_events (status, updated_at);

CREATE TABLE event_items (
    source              TEXT      NOT NULL,
    event_id            TEXT      NOT NULL,
    item                TEXT      NOT NULL,
    status              TEXT      NOT NULL DEFAULT 'processing',
    holder_execution_id TEXT      NOT NULL DEFAULT '',
    crm_ref             TEXT      NOT NULL DEFAULT '',
    review_reason       TEXT      NOT NULL DEFAULT '',
    created_at          TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at          TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (source, event_id, item),
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE CASCADE
);

CREATE TABLE executions (
    execution_id      TEXT      PRIMARY KEY,
    workflow_id       TEXT      NOT NULL DEFAULT '',
    workflow_name     TEXT      NOT NULL DEFAULT '',
    mode              TEXT      NOT NULL DEFAULT '',
    retry_of          TEXT      NOT NULL DEFAULT '',
    root_execution_id TEXT      NOT NULL DEFAULT '',
    n8n_url           TEXT      NOT NULL DEFAULT '',
    lineage_note      TEXT      NOT NULL DEFAULT '',
    first_seen_at     TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_seen_at      TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX executions_retry_of ON executions (retry_of) WHERE retry_of <> '';
CREATE INDEX executions_root ON executions (root_execution_id);

CREATE TABLE event_executions (
    source        TEXT      NOT NULL,
    event_id      TEXT      NOT NULL,
    execution_id  TEXT      NOT NULL,
    role          TEXT      NOT NULL,
    delivery      TEXT      NOT NULL DEFAULT '',
    first_seen_at TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (source, event_id, execution_id),
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE CASCADE
);
CREATE INDEX event_executions_execution ON event_executions (execution_id);

CREATE TABLE event_history (
    id            INTEGER   PRIMARY KEY AUTOINCREMENT,
    source        TEXT      NOT NULL,
    event_id      TEXT      NOT NULL,
    item          TEXT      NOT NULL DEFAULT '',
    at            TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    kind          TEXT      NOT NULL,
    execution_id  TEXT      NOT NULL DEFAULT '',
    retry_of      TEXT      NOT NULL DEFAULT '',
    workflow_id   TEXT      NOT NULL DEFAULT '',
    workflow_name TEXT      NOT NULL DEFAULT '',
    node          TEXT      NOT NULL DEFAULT '',
    decision      TEXT      NOT NULL DEFAULT '',
    delivery      TEXT      NOT NULL DEFAULT '',
    status        TEXT      NOT NULL DEFAULT '',
    actor         TEXT      NOT NULL DEFAULT '',
    message       TEXT      NOT NULL DEFAULT '',
    error_id      INTEGER,
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE CASCADE
);
CREATE INDEX event_history_event ON event_history (source, event_id, id);

-- +goose Down
DROP TABLE event_history;
DROP TABLE event_executions;
DROP TABLE executions;
DROP TABLE event_items;
DROP TABLE webhook_events;
