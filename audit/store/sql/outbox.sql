-- The alerts' outbox (outbox), their Slack threads (slack_threads) and
-- each channel's pace (slack_channels). The format of these files:
-- catalogue.go.

-- name: ChannelClaimSlot
INSERT INTO slack_channels (channel, next_at) VALUES (:channel, :next)
  ON CONFLICT (channel) DO UPDATE SET next_at = excluded.next_at WHERE slack_channels.next_at <= :now
  RETURNING next_at

-- name: ChannelPause
INSERT INTO slack_channels (channel, next_at) VALUES (:channel, :until)
  ON CONFLICT (channel) DO UPDATE SET next_at = excluded.next_at WHERE slack_channels.next_at < excluded.next_at

-- name: ChannelReadSlot
SELECT next_at FROM slack_channels WHERE channel = :channel

-- name: OutboxCount
SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')

-- name: OutboxCountAlertsByKind
SELECT alert_kind, state, count(*) AS n FROM outbox
  WHERE kind = 'alert' AND created_at >= :from AND created_at <= :to AND (:source = '' OR source = :source)
  GROUP BY alert_kind, state ORDER BY alert_kind, state

-- name: OutboxCountHeldBack
SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending') AND created_at < :before

-- name: OutboxCountThreadMessages
SELECT count(*) FROM outbox WHERE thread_key = :thread

-- name: OutboxDeleteScratch
DELETE FROM outbox WHERE source IN (:source, :other)

-- name: OutboxFinish
UPDATE outbox SET state = :state, due_at = :due,
  last_error = :last_error, sent_at = :sent_at, channel = :channel, ts = :ts, lease_owner = '', lease_until = NULL,
  attempted_by = :owner, maybe_sent = :maybe_sent
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- The due rows, each the first open one of its thread, leased to :owner
-- until :until; a row found sending whose lease ran out may have been sent
-- (maybe_sent).
-- name: OutboxLease
WITH picked AS MATERIALIZED (SELECT o.id FROM outbox o
  WHERE (o.state = 'pending' OR (o.state = 'sending' AND o.lease_until < :now)) AND o.due_at <= :now
  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.thread_key = o.thread_key AND p.id < o.id
  AND p.state IN ('pending', 'sending'))
  ORDER BY o.id LIMIT :limit {{skip_locked}})
UPDATE outbox SET state = 'sending', lease_owner = :owner, lease_until = :until, attempts = attempts + 1,
  maybe_sent = (maybe_sent OR state = 'sending'),
  attempted_by = CASE WHEN state = 'sending' THEN lease_owner ELSE attempted_by END,
  first_attempt_at = COALESCE(first_attempt_at, :now)
  WHERE id IN (SELECT id FROM picked)
  AND (state = 'pending' OR (state = 'sending' AND lease_until < :now))
  RETURNING {{outbox_columns}}

-- name: OutboxPendingInThread
SELECT EXISTS (SELECT 1 FROM outbox
  WHERE thread_key = :thread AND kind IN ('alert', 'followup') AND state = 'pending')

-- name: OutboxPruneOfErrors
DELETE FROM outbox WHERE error_id {{in_ids}}

-- name: OutboxPruneOfEvent
DELETE FROM outbox WHERE source = :source AND event_id = :event_id

-- The rows of :since not sent for want of a working Slack configuration.
-- fragment: resendable
created_at >= :since AND (state = 'unconfigured' OR (state = 'dead' AND last_error LIKE :config_errors))

-- name: OutboxQueueAgain
UPDATE outbox SET state = 'pending', due_at = :now, attempts = 0, lease_owner = '', lease_until = NULL,
  last_error = :why WHERE {{resendable}}

-- fragment: outbox_columns
id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent

-- name: OutboxReadAlerts
SELECT {{outbox_columns}} FROM outbox WHERE thread_key = :thread ORDER BY id LIMIT :limit

-- name: OutboxReadEvent
SELECT source, event_id FROM outbox WHERE id = :id AND source <> ''

-- name: OutboxReadOldestPending
SELECT {{outbox_columns}} FROM outbox WHERE state IN ('pending', 'sending') ORDER BY id LIMIT 1

-- name: OutboxReadRootRow
SELECT {{outbox_columns}} FROM outbox WHERE id = :id

-- Whether a refresh of :thread queued after row :id waits to be sent.
-- name: OutboxRefreshWaits
SELECT EXISTS (SELECT 1 FROM outbox WHERE thread_key = :thread
  AND kind = 'refresh' AND id > :id AND state IN ('pending', 'sending'))

-- name: OutboxRelease
UPDATE outbox SET state = 'pending',
  lease_owner = '', lease_until = NULL, due_at = :due, attempts = attempts - 1,
  first_attempt_at = CASE WHEN attempts <= 1 THEN NULL ELSE first_attempt_at END
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: OutboxRenewLease
UPDATE outbox SET lease_until = :until WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: OutboxWaitingAlerts
SELECT count(*) FROM outbox WHERE {{resendable}}

-- name: OutboxWrite
INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  last_error, alert_kind)
  VALUES (:now, :due, :thread_key, :kind, :source, :event_id, :error_id, :payload, :state, :last_error, :alert_kind)

-- name: ThreadPruneOfErrors
DELETE FROM slack_threads WHERE thread_key {{in_threads}}

-- name: ThreadPruneOfEvent
DELETE FROM slack_threads WHERE thread_key = :thread

-- name: ThreadPruneOfGroups
DELETE FROM slack_threads WHERE thread_key IN (
  SELECT thread_key FROM slack_threads WHERE thread_key LIKE 'group:%' AND created_at < :before LIMIT :batch)

-- name: ThreadReadRoot
SELECT thread_key, channel, ts, root_outbox_id FROM slack_threads WHERE thread_key = :thread

-- name: ThreadSave
INSERT INTO slack_threads (thread_key, channel, ts, root_outbox_id, created_at)
  VALUES (:key, :channel, :ts, :root, :now)
  ON CONFLICT (thread_key) DO NOTHING
