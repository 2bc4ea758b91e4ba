-- The alerts' outbox (outbox), their Slack threads (slack_threads) and
-- each channel's pace (slack_channels).
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- The lease of the rows a driver's OutboxLease picked (its CTE picked):
-- sending, for owner until :until; a row found sending whose lease ran out
-- may have been sent (maybe_sent).
-- fragment: outbox_lease_update
  UPDATE outbox SET state = 'sending', lease_owner = :owner, lease_until = :until, attempts = attempts + 1,
  maybe_sent = (maybe_sent OR state = 'sending'),
  attempted_by = CASE WHEN state = 'sending' THEN lease_owner ELSE attempted_by END,
  first_attempt_at = COALESCE(first_attempt_at, :now)
  WHERE id IN (SELECT id FROM picked)
  AND (state = 'pending' OR (state = 'sending' AND lease_until < :now))
  RETURNING id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent

-- name: ChannelClaimSlot
INSERT INTO slack_channels (channel, next_at)
  VALUES (:channel, :next)
  ON CONFLICT (channel) DO UPDATE SET next_at = excluded.next_at WHERE slack_channels.next_at <= :now
  RETURNING next_at

-- name: ChannelPause
INSERT INTO slack_channels (channel, next_at)
  VALUES (:channel, :until)
  ON CONFLICT (channel) DO UPDATE SET next_at = excluded.next_at WHERE slack_channels.next_at < excluded.next_at

-- name: ChannelReadSlot
SELECT next_at FROM slack_channels WHERE channel = ?

-- name: OutboxCount
SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')

-- name: OutboxCountAlertsByKind
SELECT alert_kind, state, count(*) AS n FROM outbox
  WHERE kind = 'alert' AND created_at >= ? AND created_at <= ? AND (? = '' OR source = ?)
  GROUP BY alert_kind, state ORDER BY alert_kind, state

-- name: OutboxCountHeldBack
SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending') AND created_at < ?

-- name: OutboxCountThreadMessages
SELECT count(*) FROM outbox WHERE thread_key = ?

-- name: OutboxDeleteScratch
DELETE FROM outbox WHERE source IN (:source, :other)

-- name: OutboxFinish
UPDATE outbox SET state = :state, due_at = :due,
  last_error = :last_error, sent_at = :sent_at, channel = :channel, ts = :ts, lease_owner = '', lease_until = NULL,
  attempted_by = :owner, maybe_sent = :maybe_sent
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: OutboxPendingInThread
SELECT EXISTS (SELECT 1 FROM outbox
  WHERE thread_key = ? AND kind IN ('alert', 'followup') AND state = 'pending')

-- name: OutboxPruneOfErrors
DELETE FROM outbox WHERE error_id IN (?)

-- name: OutboxPruneOfEvent
DELETE FROM outbox WHERE source = :source AND event_id = :event_id

-- name: OutboxQueueAgain
UPDATE outbox SET state = 'pending', due_at = :now,
  attempts = 0, lease_owner = '', lease_until = NULL,
  last_error = :why WHERE created_at >= :since AND (state = 'unconfigured'
  OR (state = 'dead' AND last_error LIKE :config_errors))

-- name: OutboxReadAlerts
SELECT id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent FROM outbox WHERE thread_key = ? ORDER BY id LIMIT ?

-- name: OutboxReadEvent
SELECT source, event_id FROM outbox WHERE id = ? AND source <> ''

-- name: OutboxReadOldestPending
SELECT id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent FROM outbox WHERE state IN ('pending', 'sending') ORDER BY id LIMIT 1

-- name: OutboxReadRootRow
SELECT id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent FROM outbox WHERE id = ?

-- name: OutboxRefreshWaits
SELECT EXISTS (SELECT 1 FROM outbox WHERE thread_key = ?
  AND kind = 'refresh' AND id > ? AND state IN ('pending', 'sending'))

-- name: OutboxRelease
UPDATE outbox SET state = 'pending',
  lease_owner = '', lease_until = NULL, due_at = :due, attempts = attempts - 1,
  first_attempt_at = CASE WHEN attempts <= 1 THEN NULL ELSE first_attempt_at END
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: OutboxRenewLease
UPDATE outbox SET lease_until = :until
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: OutboxWaitingAlerts
SELECT count(*) FROM outbox WHERE created_at >= :since AND (state = 'unconfigured'
  OR (state = 'dead' AND last_error LIKE :config_errors))

-- name: OutboxWrite
INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  last_error, alert_kind)
  VALUES (:now, :due, :thread_key, :kind, :source, :event_id, :error_id, :payload, :state, :last_error, :alert_kind)

-- name: ThreadPruneOfErrors
DELETE FROM slack_threads WHERE thread_key IN (?)

-- name: ThreadPruneOfEvent
DELETE FROM slack_threads WHERE thread_key = :thread

-- name: ThreadPruneOfGroups
DELETE FROM slack_threads WHERE thread_key IN (
  SELECT thread_key FROM slack_threads WHERE thread_key LIKE 'group::%' AND created_at < :before LIMIT :batch)

-- name: ThreadReadRoot
SELECT thread_key, channel, ts, root_outbox_id
  FROM slack_threads WHERE thread_key = ?

-- name: ThreadSave
INSERT INTO slack_threads (thread_key, channel, ts,
  root_outbox_id, created_at) VALUES (:key, :channel, :ts, :root, :now)
  ON CONFLICT (thread_key) DO NOTHING
