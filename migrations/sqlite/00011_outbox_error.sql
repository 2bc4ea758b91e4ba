-- Pruning an unlinked error deletes its alerts by error_id: without an
-- index every batch of pruned errors read the outbox whole.

-- +goose Up
CREATE INDEX outbox_error ON outbox (error_id) WHERE error_id IS NOT NULL;

-- +goose Down
DROP INDEX outbox_error;
