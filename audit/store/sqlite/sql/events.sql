-- The ledger's entries (webhook_events). SQLite's statements where it
-- differs from PostgreSQL: the rest are in ../../sql/.

-- SQLite: pragma_index_list and pragma_index_info instead of pg_index.
-- name: EventCountUniqueKeys
SELECT count(*) FROM pragma_index_list('webhook_events') l WHERE l."unique" = 1
  AND l.partial = 0 AND (SELECT count(*) FROM pragma_index_info(l.name)) = 2
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'source')
  AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) WHERE name = 'event_id')
