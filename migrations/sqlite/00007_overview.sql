-- Redelivery classes and the overview's numbers, as in postgres/00007_overview.sql.

-- +goose Up
ALTER TABLE event_executions ADD COLUMN delivery_id TEXT NOT NULL DEFAULT '';
ALTER TABLE event_executions ADD COLUMN workflow_id TEXT NOT NULL DEFAULT '';
ALTER TABLE event_executions ADD COLUMN class TEXT NOT NULL DEFAULT '';
ALTER TABLE event_history ADD COLUMN class TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN first_workflow_id TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN last_delivery_id TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD COLUMN last_presented_at TIMESTAMP;

CREATE TABLE stats_hourly (
    hour        TIMESTAMP NOT NULL,
    source      TEXT      NOT NULL,
    workflow_id TEXT      NOT NULL,
    metric      TEXT      NOT NULL,
    shard       INTEGER   NOT NULL,
    n           INTEGER   NOT NULL,
    PRIMARY KEY (hour, source, workflow_id, metric, shard)
);

CREATE TABLE stats_daily (
    day         TIMESTAMP NOT NULL,
    source      TEXT      NOT NULL,
    workflow_id TEXT      NOT NULL,
    metric      TEXT      NOT NULL,
    n           INTEGER   NOT NULL,
    PRIMARY KEY (day, source, workflow_id, metric)
);

CREATE TABLE resolution_times (
    id          INTEGER   PRIMARY KEY,
    resolved_at TIMESTAMP NOT NULL,
    source      TEXT      NOT NULL,
    seconds     REAL      NOT NULL
);
CREATE INDEX resolution_times_at ON resolution_times (resolved_at);

-- +goose Down
DROP TABLE resolution_times;
DROP TABLE stats_daily;
DROP TABLE stats_hourly;
ALTER TABLE webhook_events DROP COLUMN last_presented_at;
ALTER TABLE webhook_events DROP COLUMN last_delivery_id;
ALTER TABLE webhook_events DROP COLUMN first_workflow_id;
ALTER TABLE event_history DROP COLUMN class;
ALTER TABLE event_executions DROP COLUMN class;
ALTER TABLE event_executions DROP COLUMN workflow_id;
ALTER TABLE event_executions DROP COLUMN delivery_id;
