-- The ledger. webhook_events keeps the exact shape of the design, so SQL that
-- n8n's Postgres node already runs against it keeps working; everything the
-- service adds is a column with a default. IF NOT EXISTS adopts a table that
-- users created by hand before they installed the service.

-- +goose Up
CREATE TABLE IF NOT EXISTS webhook_events (
    source     text        NOT NULL,
    event_id   text        NOT NULL,
    status     text        NOT NULL DEFAULT 'processing',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, event_id)
);

ALTER TABLE webhook_events
    ADD COLUMN IF NOT EXISTS holder_execution_id text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS deliveries          integer     NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS item_count          integer     NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS fingerprint         text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS crm_ref             text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS review_reason       text        NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS last_seen_at        timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN IF NOT EXISTS stale_alerted_at    timestamptz;

CREATE INDEX IF NOT EXISTS webhook_events_activity ON webhook_events (last_seen_at DESC, source DESC, event_id DESC);
CREATE INDEX IF NOT EXISTS webhook_events_status ON webhook_events (status, updated_at);

CREATE TABLE event_items (
    source              text        NOT NULL,
    event_id            text        NOT NULL,
    item                text        NOT NULL,
    status              text        NOT NULL DEFAULT 'processing',
    holder_execution_id text        NOT NULL DEFAULT '',
    crm_ref             text        NOT NULL DEFAULT '',
    review_reason       text        NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, event_id, item),
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE CASCADE
);

CREATE TABLE executions (
    execution_id      text        PRIMARY KEY,
    workflow_id       text        NOT NULL DEFAULT '',
    workflow_name     text        NOT NULL DEFAULT '',
    mode              text        NOT NULL DEFAULT '',
    retry_of          text        NOT NULL DEFAULT '',
    root_execution_id text        NOT NULL DEFAULT '',
    n8n_url           text        NOT NULL DEFAULT '',
    lineage_note      text        NOT NULL DEFAULT '',
    first_seen_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX executions_retry_of ON executions (retry_of) WHERE retry_of <> '';
CREATE INDEX executions_root ON executions (root_execution_id);

-- role is claim (it presented the key), report (it reported an outcome) or
-- error (an error of it was linked here). deliveries counts the claims.
CREATE TABLE event_executions (
    source        text        NOT NULL,
    event_id      text        NOT NULL,
    execution_id  text        NOT NULL,
    role          text        NOT NULL,
    delivery      text        NOT NULL DEFAULT '',
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, event_id, execution_id),
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE CASCADE
);
CREATE INDEX event_executions_execution ON event_executions (execution_id);

CREATE TABLE event_history (
    id            bigserial   PRIMARY KEY,
    source        text        NOT NULL,
    event_id      text        NOT NULL,
    item          text        NOT NULL DEFAULT '',
    at            timestamptz NOT NULL DEFAULT now(),
    kind          text        NOT NULL,
    execution_id  text        NOT NULL DEFAULT '',
    retry_of      text        NOT NULL DEFAULT '',
    workflow_id   text        NOT NULL DEFAULT '',
    workflow_name text        NOT NULL DEFAULT '',
    node          text        NOT NULL DEFAULT '',
    decision      text        NOT NULL DEFAULT '',
    delivery      text        NOT NULL DEFAULT '',
    status        text        NOT NULL DEFAULT '',
    actor         text        NOT NULL DEFAULT '',
    message       text        NOT NULL DEFAULT '',
    error_id      bigint,
    FOREIGN KEY (source, event_id) REFERENCES webhook_events (source, event_id) ON DELETE CASCADE
);
CREATE INDEX event_history_event ON event_history (source, event_id, id);

-- +goose Down
DROP TABLE event_history;
DROP TABLE event_executions;
DROP TABLE executions;
DROP TABLE event_items;
DROP TABLE webhook_events;
