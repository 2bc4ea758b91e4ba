-- As postgres/00014_digest.sql, in SQLite's types.

-- +goose Up
CREATE TABLE slack_digests (
    day        TEXT      PRIMARY KEY,
    created_at TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    outbox_id  INTEGER
);

-- +goose Down
DROP TABLE slack_digests;
