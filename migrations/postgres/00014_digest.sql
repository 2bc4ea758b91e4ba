-- The daily digest: one row per day it was made (the day in
-- RETRYAUDIT_DIGEST_TZ, YYYY-MM-DD), written in the transaction that writes
-- its outbox row, so that two instances make it once and a Slack outage
-- delays it without losing or doubling it. outbox_id is its message; none
-- when there was nothing to say.

-- +goose Up
CREATE TABLE slack_digests (
    day        text        PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    outbox_id  bigint
);

-- +goose Down
DROP TABLE slack_digests;
