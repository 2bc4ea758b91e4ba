-- Retries people ask n8n for ("Retry in n8n", one or in bulk). retry_runs
-- are the bulk runs; retry_items the entries a run plans, and every single
-- retry (run_id NULL). Times are Unix milliseconds: the package retries
-- reads and writes them the same way on both databases.

-- +goose Up
CREATE TABLE retry_runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    created_by    TEXT    NOT NULL,
    via           TEXT    NOT NULL DEFAULT '',
    filter        TEXT    NOT NULL DEFAULT '',
    state         TEXT    NOT NULL,
    rate          INTEGER NOT NULL,
    in_flight     INTEGER NOT NULL,
    owner         TEXT    NOT NULL DEFAULT '',
    heartbeat_at  BIGINT  NOT NULL DEFAULT 0,
    cancelled_by  TEXT    NOT NULL DEFAULT '',
    created_at    BIGINT  NOT NULL,
    finished_at   BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX retry_runs_state ON retry_runs (state, heartbeat_at);

CREATE TABLE retry_items (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id           BIGINT  REFERENCES retry_runs (id) ON DELETE CASCADE,
    source           TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    item             TEXT    NOT NULL DEFAULT '',
    version          BIGINT  NOT NULL,
    execution_id     TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL,
    reason           TEXT    NOT NULL DEFAULT '',
    actor            TEXT    NOT NULL DEFAULT '',
    via              TEXT    NOT NULL DEFAULT '',
    new_execution_id TEXT    NOT NULL DEFAULT '',
    n8n_status       TEXT    NOT NULL DEFAULT '',
    sent_at          BIGINT  NOT NULL DEFAULT 0,
    updated_at       BIGINT  NOT NULL
);
CREATE INDEX retry_items_run ON retry_items (run_id, id);
CREATE INDEX retry_items_entry ON retry_items (source, event_id, item, id);

-- +goose Down
DROP TABLE retry_items;
DROP TABLE retry_runs;
