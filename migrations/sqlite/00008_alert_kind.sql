-- The kind of an alert as a column of its own, as in postgres/00008_alert_kind.sql.

-- +goose Up
ALTER TABLE outbox ADD COLUMN alert_kind TEXT NOT NULL DEFAULT '';
UPDATE outbox SET alert_kind = COALESCE(json_extract(payload, '$.kind'), '');
CREATE INDEX outbox_alert_kinds ON outbox (created_at, source, alert_kind, state);

-- +goose Down
DROP INDEX outbox_alert_kinds;
ALTER TABLE outbox DROP COLUMN alert_kind;
