-- The kind of an alert as a column of its own: the overview counts alerts
-- by kind and state, which read every alert row's JSON payload before.

-- +goose Up
ALTER TABLE outbox ADD COLUMN alert_kind text NOT NULL DEFAULT '';
UPDATE outbox SET alert_kind = COALESCE(CAST(payload AS json) ->> 'kind', '');
CREATE INDEX outbox_alert_kinds ON outbox (created_at, source, alert_kind, state);

-- +goose Down
DROP INDEX outbox_alert_kinds;
ALTER TABLE outbox DROP COLUMN alert_kind;
