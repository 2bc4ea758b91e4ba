-- The ledger's entries: webhook_events (an event) and event_items (an item
-- of a multi-item event); the claim and outcome batches' writes.
--
-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../../sql/, in the file of the same name): row locks that skip what
-- another session holds, batches as one data-modifying statement, typed
-- parameters. The files' format is ../../sql/'s.

-- name: EventCountUniqueKeys
SELECT count(*) FROM pg_index i WHERE i.indrelid = 'webhook_events'::regclass
  AND i.indisunique AND i.indnkeyatts = 2 AND i.indpred IS NULL
  AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
  WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY['event_id', 'source']

-- name: EventFindDone
SELECT source, event_id FROM webhook_events
  WHERE status = 'done' AND last_seen_at < ? ORDER BY last_seen_at LIMIT ? FOR UPDATE SKIP LOCKED