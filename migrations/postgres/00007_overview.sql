-- Why an event was delivered again: the sender's delivery id, the workflow
-- that presented it and the class of the redelivery, with each claim. And
-- the overview's numbers, kept as they happen: counts per hour, source,
-- workflow and metric (written in the claim's, outcome's or resolution's own
-- transaction; shard spreads concurrent writers over rows; a job merges the
-- shards of past hours and folds hours older than 48 h into days), and how
-- long each unknown outcome waited for a person.

-- +goose Up
ALTER TABLE event_executions
    ADD COLUMN delivery_id text NOT NULL DEFAULT '',
    ADD COLUMN workflow_id text NOT NULL DEFAULT '',
    ADD COLUMN class       text NOT NULL DEFAULT '';
ALTER TABLE event_history ADD COLUMN class text NOT NULL DEFAULT '';
-- What a redelivery is compared with: the workflow of the first delivery,
-- and the delivery id and time of the last one.
ALTER TABLE webhook_events
    ADD COLUMN first_workflow_id text NOT NULL DEFAULT '',
    ADD COLUMN last_delivery_id  text NOT NULL DEFAULT '',
    ADD COLUMN last_presented_at timestamptz;

CREATE TABLE stats_hourly (
    hour        timestamptz NOT NULL,
    source      text        NOT NULL,
    workflow_id text        NOT NULL,
    metric      text        NOT NULL,
    shard       integer     NOT NULL,
    n           bigint      NOT NULL,
    PRIMARY KEY (hour, source, workflow_id, metric, shard)
);

-- What stats_hourly folds into once an hour is over 48 h old.
CREATE TABLE stats_daily (
    day         timestamptz NOT NULL,
    source      text        NOT NULL,
    workflow_id text        NOT NULL,
    metric      text        NOT NULL,
    n           bigint      NOT NULL,
    PRIMARY KEY (day, source, workflow_id, metric)
);

CREATE TABLE resolution_times (
    id          bigserial        PRIMARY KEY,
    resolved_at timestamptz      NOT NULL,
    source      text             NOT NULL,
    seconds     double precision NOT NULL
);
CREATE INDEX resolution_times_at ON resolution_times (resolved_at);

-- +goose Down
DROP TABLE resolution_times;
DROP TABLE stats_daily;
DROP TABLE stats_hourly;
ALTER TABLE webhook_events DROP COLUMN last_presented_at, DROP COLUMN last_delivery_id, DROP COLUMN first_workflow_id;
ALTER TABLE event_history DROP COLUMN class;
ALTER TABLE event_executions DROP COLUMN class, DROP COLUMN workflow_id, DROP COLUMN delivery_id;
