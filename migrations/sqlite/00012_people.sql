-- Who did what: the audit log reads people's acts on entries from
-- event_history (the lines with an actor) and the acts that touch no entry
-- (sign-ins refused, bulk retry runs) from people_actions, in one read
-- (UNION ALL) ordered by time; each side has an index in that order.

-- +goose Up
CREATE TABLE people_actions (
    id       INTEGER   PRIMARY KEY AUTOINCREMENT,
    at       TIMESTAMP NOT NULL,
    actor    TEXT      NOT NULL,
    via      TEXT      NOT NULL DEFAULT '',
    action   TEXT      NOT NULL,
    source   TEXT      NOT NULL DEFAULT '',
    event_id TEXT      NOT NULL DEFAULT '',
    detail   TEXT      NOT NULL DEFAULT ''
);
CREATE INDEX people_actions_at ON people_actions (at, id);
CREATE INDEX event_history_actor_at ON event_history (at, id) WHERE actor <> '';

-- +goose Down
DROP INDEX event_history_actor_at;
DROP TABLE people_actions;
