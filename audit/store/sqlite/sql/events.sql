-- The ledger's entries: webhook_events (an event) and event_items (an item
-- of a multi-item event); the claim and outcome batches' writes.
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- SQLite: pragma_index_list and pragma_index_info instead of pg_index.
-- name: EventCountUniqueKeys
SELECT count(*) FROM pragma_index_list('webhook_events') l WHERE l."unique" = 1
  AND l.partial = 0 AND (SELECT count(*) FROM pragma_index_info(l.name)) = 2
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'source')
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'event_id')

-- SQLite: no FOR UPDATE SKIP LOCKED: SQLite has one writer, there is nothing to skip.
-- name: EventFindDone
SELECT source, event_id FROM webhook_events
  WHERE status = 'done' AND last_seen_at < ? ORDER BY last_seen_at LIMIT ?