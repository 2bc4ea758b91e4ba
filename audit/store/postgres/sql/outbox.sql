-- The alerts' outbox (outbox), their Slack threads (slack_threads) and
-- each channel's pace (slack_channels).
--
-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../../sql/, in the file of the same name): row locks that skip what
-- another session holds, batches as one data-modifying statement, typed
-- parameters. The files' format is ../../sql/'s.

-- name: OutboxLease
WITH picked AS MATERIALIZED (SELECT o.id FROM outbox o
  WHERE (o.state = 'pending' OR (o.state = 'sending' AND o.lease_until < :now)) AND o.due_at <= :now
  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.thread_key = o.thread_key AND p.id < o.id
  AND p.state IN ('pending', 'sending'))
  ORDER BY o.id LIMIT :limit FOR UPDATE SKIP LOCKED)
{{outbox_lease_update}}
