-- The ledger's entries (webhook_events). PostgreSQL's statements where it
-- differs from SQLite: the rest are in ../../sql/.

-- name: EventCountUniqueKeys
SELECT count(*) FROM pg_index i WHERE i.indrelid = 'webhook_events'::regclass
  AND i.indisunique AND i.indnkeyatts = 2 AND i.indpred IS NULL
  AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
  WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY['event_id', 'source']
