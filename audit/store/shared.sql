-- The store's statements where PostgreSQL and SQLite agree. A statement
-- in which they differ is in each driver's queries.sql instead.
--
-- Each statement follows a line "-- name: Name"; the store's queries struct
-- has a field of that name. Placeholders are ? (rebound by sqlx) or :name.
-- A piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- An execution seen again takes what it says now, where it says anything
-- (UpsertExecution, and the batches' upserts: EventBatchCapture,
-- ExecutionBatchUpsert).
-- fragment: execution_merge
  workflow_id = CASE WHEN excluded.workflow_id <> '' THEN excluded.workflow_id ELSE executions.workflow_id END,
  workflow_name = CASE WHEN excluded.workflow_name <> '' THEN excluded.workflow_name ELSE executions.workflow_name END,
  mode = CASE WHEN excluded.mode <> '' THEN excluded.mode ELSE executions.mode END,
  lineage_note = CASE WHEN excluded.lineage_note <> '' THEN excluded.lineage_note ELSE executions.lineage_note END,
  claimed_retry_of = CASE WHEN excluded.claimed_retry_of <> '' THEN excluded.claimed_retry_of
  ELSE executions.claimed_retry_of END,
  last_seen_at = excluded.last_seen_at

-- name: ReadEventState
SELECT status, updated_at, deliveries, crm_ref
  FROM webhook_events WHERE source = ? AND event_id = ?

-- name: ReadExecution
SELECT execution_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at FROM executions WHERE execution_id = ?

-- name: ThreadOpen
SELECT EXISTS (SELECT 1 FROM outbox WHERE thread_key = ? AND kind = 'alert')

-- name: WriteOutbox
INSERT INTO outbox (created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  last_error, alert_kind)
  VALUES (:now, :due, :thread_key, :kind, :source, :event_id, :error_id, :payload, :state, :last_error, :alert_kind)

-- name: ReadLastSettlement
SELECT id, source, event_id, item, at, kind, execution_id,
  retry_of, workflow_id, workflow_name, node, decision, delivery, status, actor, message, error_id
  FROM event_history WHERE source = ? AND event_id = ? AND kind IN ('outcome', 'resolution')
  ORDER BY id DESC LIMIT 1

-- One request of a batch that runs alone (Store.alone): what it wrote
-- stays, or is rolled back when it is refused, and the batch goes on.
-- name: Savepoint
SAVEPOINT alone

-- name: SavepointRollback
ROLLBACK TO SAVEPOINT alone

-- name: SavepointRelease
RELEASE SAVEPOINT alone

-- name: CountItems
SELECT status, count(*) AS n FROM event_items WHERE source = ? AND event_id = ? GROUP BY status

-- name: ReadDuplicateError
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors WHERE dedupe_key = ?

-- name: MergeError
UPDATE n8n_errors SET retry_of = :retry_of,
  workflow_id = :workflow_id, workflow_name = :workflow_name, mode = :mode, node = :node,
  message = :message, http_code = :http_code, n8n_url = :url, payload = :payload,
  payload_truncated = :truncated WHERE id = :id

-- name: FindEvents
SELECT source, event_id FROM event_executions
  WHERE execution_id = ? ORDER BY first_seen_at, source, event_id

-- name: LinkError
UPDATE n8n_errors SET source = :source, event_id = :event_id
  WHERE id = :id AND source IS NULL

-- name: RecordErrorExecution
INSERT INTO event_executions (source, event_id,
  execution_id, role, first_seen_at) VALUES (:source, :event_id, :execution_id, 'error', :now)
  ON CONFLICT (source, event_id, execution_id) DO NOTHING

-- name: MarkErrorForReview
UPDATE webhook_events SET review_reason = 'error',
  last_seen_at = :now WHERE source = :source AND event_id = :event_id AND status = 'processing'
  AND holder_execution_id = :holder AND review_reason = ''

-- name: ReadRetryOf
SELECT retry_of FROM executions WHERE execution_id = ?

-- name: ReadWhyNotActing
SELECT ee.acted, ee.role, COALESCE((SELECT h.decision
  FROM event_history h WHERE h.source = ee.source AND h.event_id = ee.event_id AND h.kind = 'claim'
  AND h.execution_id = ee.execution_id ORDER BY h.id DESC LIMIT 1), '') AS decision
  FROM event_executions ee WHERE ee.source = ? AND ee.event_id = ? AND ee.execution_id = ?

-- name: LinkPendingErrors
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors WHERE source IS NULL AND kind IN (?, ?, ?)
  AND (execution_id IN (?) OR root_execution_id IN (?)) ORDER BY id

-- name: ErrorKnown
SELECT EXISTS (SELECT 1 FROM n8n_errors WHERE dedupe_key = ?)

-- name: ReadError
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id, payload FROM n8n_errors WHERE id = ?

-- name: ListErrors
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors
  WHERE id < ? AND ((? = '' AND kind <> 'test_payload') OR kind = ?)
  ORDER BY id DESC LIMIT ?

-- name: CountErrors
SELECT kind, count(*) AS n FROM n8n_errors GROUP BY kind

-- name: ReadExecutionErrors
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors WHERE execution_id = ? ORDER BY id

-- name: ReadAlertGroup
SELECT group_key, kind, workflow_id, node, thread_key, opened_at,
  closes_at, reply_due_at FROM alert_groups WHERE group_key = ?

-- name: PendingInThread
SELECT EXISTS (SELECT 1 FROM outbox
  WHERE thread_key = ? AND kind IN ('alert', 'followup') AND state = 'pending')

-- name: SpaceGroupReplies
UPDATE alert_groups SET reply_due_at = :due
  WHERE group_key = :key


-- name: ReadHistoryPage
SELECT id, source, event_id, item, at, kind, execution_id, retry_of, workflow_id,
  workflow_name, node, decision, delivery, class, status, actor, message, crm_ref, error_id FROM event_history WHERE source = ? AND event_id = ? AND id < ? ORDER BY id DESC LIMIT ?

-- name: CountHistory
SELECT kind, count(*) AS n FROM event_history
  WHERE source = ? AND event_id = ? GROUP BY kind

-- name: ReadRefusedReports
SELECT id, source, event_id, item, at, kind, execution_id, retry_of, workflow_id,
  workflow_name, node, decision, delivery, class, status, actor, message, crm_ref, error_id FROM event_history WHERE source = ? AND event_id = ? AND kind = ? ORDER BY id DESC LIMIT 20

-- name: ReleaseLease
DELETE FROM job_leases WHERE name = :name AND owner = :owner

-- name: ReadState
SELECT value FROM service_state WHERE name = ?

-- name: WriteState
INSERT INTO service_state (name, value, updated_at)
  VALUES (:name, :value, :now)
  ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at

-- name: CreateSecret
INSERT INTO service_state (name, value, updated_at)
  VALUES (:name, :value, :now) ON CONFLICT (name) DO NOTHING

-- name: ReadExecutionWorkflow
SELECT workflow_id FROM executions WHERE execution_id = ?

-- name: ReRootExecutions
UPDATE executions SET root_execution_id = :root
  WHERE root_execution_id = :id AND execution_id <> :id

-- name: ReRootErrors
UPDATE n8n_errors SET root_execution_id = :root
  WHERE root_execution_id = :id

-- name: ReadKnownLineage
SELECT retry_of, mode, workflow_id FROM executions
  WHERE execution_id = ? AND (retry_of <> '' OR mode <> '')

-- name: ReadRetries
SELECT execution_id, workflow_id, workflow_name, mode, retry_of, claimed_retry_of,
  root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at FROM executions WHERE retry_of = ? ORDER BY first_seen_at

-- name: ReadTouchedEvents
SELECT source, event_id, role, delivery,
  first_seen_at FROM event_executions WHERE execution_id = ? ORDER BY first_seen_at

-- name: RenewOutboxLease
UPDATE outbox SET lease_until = :until
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: ReleaseOutboxRow
UPDATE outbox SET state = 'pending',
  lease_owner = '', lease_until = NULL, due_at = :due, attempts = attempts - 1,
  first_attempt_at = CASE WHEN attempts <= 1 THEN NULL ELSE first_attempt_at END
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: FinishOutbox
UPDATE outbox SET state = :state, due_at = :due,
  last_error = :last_error, sent_at = :sent_at, channel = :channel, ts = :ts, lease_owner = '', lease_until = NULL,
  attempted_by = :owner, maybe_sent = :maybe_sent
  WHERE id = :id AND lease_owner = :owner AND state = 'sending'

-- name: RefreshWaits
SELECT EXISTS (SELECT 1 FROM outbox WHERE thread_key = ?
  AND kind = 'refresh' AND id > ? AND state IN ('pending', 'sending'))

-- name: SaveThread
INSERT INTO slack_threads (thread_key, channel, ts,
  root_outbox_id, created_at) VALUES (:key, :channel, :ts, :root, :now)
  ON CONFLICT (thread_key) DO NOTHING

-- name: ReadRoot
SELECT thread_key, channel, ts, root_outbox_id
  FROM slack_threads WHERE thread_key = ?

-- name: ReadRootRow
SELECT id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent FROM outbox WHERE id = ?

-- name: CountOutbox
SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')

-- name: CountHeldBack
SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending') AND created_at < ?

-- name: ReadOldestPending
SELECT id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent FROM outbox WHERE state IN ('pending', 'sending') ORDER BY id LIMIT 1

-- name: CountReviewQueue
SELECT count(*) FROM webhook_events
  WHERE status = 'processing' AND (review_reason <> '' OR updated_at < ?)

-- name: ReadOutboxEvent
SELECT source, event_id FROM outbox WHERE id = ? AND source <> ''

-- name: RecordReporter
INSERT INTO event_executions (source, event_id, execution_id, role, first_seen_at)
  VALUES (:source, :event_id, :execution_id, 'report', :now)
  ON CONFLICT (source, event_id, execution_id) DO NOTHING

-- name: ContradictEvent
UPDATE webhook_events SET status = 'processing', review_reason = 'contradiction', updated_at = :now,
  last_seen_at = :now, stale_alerted_at = NULL, crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item_count = 0 AND status = 'failed'
  AND holder_execution_id = :reporter
  RETURNING status, holder_execution_id, item_count, review_reason

-- name: ContradictItem
UPDATE event_items SET status = 'processing', review_reason = 'contradiction', updated_at = :now,
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'failed'
  AND holder_execution_id = :reporter
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason

-- name: MarkContradictionForReview
UPDATE webhook_events SET review_reason = 'contradiction'
  WHERE source = :source AND event_id = :event_id AND status = 'processing'

-- name: ReadContradiction
SELECT EXISTS (SELECT 1 FROM event_history
  WHERE source = ? AND event_id = ? AND item = ? AND kind = 'contradiction' AND execution_id = ? AND decision = ?
  AND id > COALESCE((SELECT MAX(id) FROM event_history WHERE source = ? AND event_id = ? AND item = ?
  AND kind = 'resolution'), 0))

-- name: MarkUnknownForReview
UPDATE webhook_events SET review_reason = 'unknown'
  WHERE source = :source AND event_id = :event_id AND status = 'processing'

-- name: ReadEvidence
SELECT EXISTS (SELECT 1 FROM event_history
  WHERE source = ? AND event_id = ? AND item = ? AND kind = 'not_holder' AND execution_id = ? AND decision = ?)

-- name: MarkNotHolderForReview
UPDATE webhook_events SET review_reason = 'not_holder'
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND review_reason = ''

-- name: ReadChannelSlot
SELECT next_at FROM slack_channels WHERE channel = ?

-- name: PauseChannel
INSERT INTO slack_channels (channel, next_at)
  VALUES (:channel, :until)
  ON CONFLICT (channel) DO UPDATE SET next_at = excluded.next_at WHERE slack_channels.next_at < excluded.next_at

-- name: ReadEvent
SELECT source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
  deliveries, item_count, fingerprint, crm_ref, review_reason, stale_alerted_at,
  CASE WHEN status = 'processing' AND (review_reason <> '' OR updated_at < ?) THEN 1 ELSE 0 END AS needs_review
  FROM webhook_events WHERE source = ? AND event_id = ?

-- name: ReadItems
SELECT item, status, holder_execution_id, crm_ref,
  review_reason, created_at, updated_at FROM event_items WHERE source = ? AND event_id = ? ORDER BY item

-- name: ReadExecutions
SELECT x.execution_id, x.workflow_id,
  x.workflow_name, x.mode, x.retry_of, x.claimed_retry_of, x.root_execution_id, x.n8n_url, x.lineage_note,
  x.first_seen_at, x.last_seen_at, ee.role, ee.delivery, ee.acted, ee.delivery_id, ee.class,
  ee.first_seen_at AS touched_at
  FROM event_executions ee JOIN executions x ON x.execution_id = ee.execution_id
  WHERE ee.source = ? AND ee.event_id = ? ORDER BY ee.first_seen_at, x.execution_id LIMIT ?

-- name: ReadEventErrors
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors WHERE source = ? AND event_id = ? ORDER BY id LIMIT ?

-- name: ReadAlerts
SELECT id, created_at, due_at, thread_key, kind, source, event_id, error_id, payload, state,
  attempts, last_error, sent_at, channel, ts, lease_owner, attempted_by, first_attempt_at, maybe_sent FROM outbox WHERE thread_key = ? ORDER BY id LIMIT ?

-- name: CountThreadMessages
SELECT count(*) FROM outbox WHERE thread_key = ?

-- name: ListEvents
SELECT source, event_id, status, created_at, updated_at, last_seen_at, holder_execution_id,
  deliveries, item_count, fingerprint, crm_ref, review_reason, stale_alerted_at,
  CASE WHEN status = 'processing' AND (review_reason <> '' OR updated_at < ?) THEN 1 ELSE 0 END AS needs_review
  FROM webhook_events
  WHERE (last_seen_at, source, event_id) < (?, ?, ?)
  AND (? = '' OR source = ?) AND (? = '' OR status = ?)
  AND (? = '' OR substr(event_id, 1, ?) = ?)
  AND (? = '' OR EXISTS (SELECT 1 FROM event_executions x
  WHERE x.source = webhook_events.source AND x.event_id = webhook_events.event_id
  AND CASE WHEN ? = 'default' THEN x.execution_id NOT LIKE '%@%' ELSE x.execution_id LIKE ? END))
  AND updated_at < ?
  AND (? = 0 OR (status = 'processing' AND (review_reason <> '' OR updated_at < ?)))
  ORDER BY last_seen_at DESC, source DESC, event_id DESC LIMIT ?

-- name: ReadReviewQueue
SELECT w.source, w.event_id, w.status,
  w.created_at, w.updated_at, w.last_seen_at, w.holder_execution_id, w.deliveries, w.item_count, w.fingerprint,
  w.crm_ref, w.review_reason, w.stale_alerted_at, 1 AS needs_review,
  COALESCE((SELECT h.message FROM event_history h WHERE h.source = w.source AND h.event_id = w.event_id
  AND h.kind IN ('error', 'outcome', 'stale', 'not_holder') ORDER BY h.id DESC LIMIT 1), '') AS last_news
  FROM webhook_events w
  WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < ?)
  ORDER BY w.updated_at, w.source, w.event_id LIMIT ?

-- name: CountEvents
SELECT status, count(*) AS n FROM webhook_events GROUP BY status

-- name: QueueAlertsAgain
UPDATE outbox SET state = 'pending', due_at = :now,
  attempts = 0, lease_owner = '', lease_until = NULL,
  last_error = :why WHERE created_at >= :since AND (state = 'unconfigured'
  OR (state = 'dead' AND last_error LIKE :config_errors))

-- name: PruneExecutions
DELETE FROM executions WHERE execution_id IN (
  SELECT x.execution_id FROM executions x WHERE x.last_seen_at < :before
  AND NOT EXISTS (SELECT 1 FROM event_executions e WHERE e.execution_id = x.execution_id)
  AND NOT EXISTS (SELECT 1 FROM n8n_errors r WHERE r.execution_id = x.execution_id)
  AND NOT EXISTS (SELECT 1 FROM executions c WHERE c.retry_of = x.execution_id)
  LIMIT :batch)

-- name: DropPayloads
UPDATE n8n_errors SET payload = '', payload_dropped = true WHERE id IN (
  SELECT id FROM n8n_errors WHERE payload_dropped = false AND payload <> '' AND received_at < :before
  ORDER BY id LIMIT :batch)

-- name: PruneEvent
DELETE FROM webhook_events WHERE source = :source AND event_id = :event_id
  AND status = 'done' AND last_seen_at < :before

-- name: LockEvent
UPDATE webhook_events SET last_seen_at = :now
  WHERE source = :source AND event_id = :event_id
  RETURNING item_count

-- name: ReadSettlements
SELECT kind, actor, execution_id, at FROM event_history
  WHERE source = ? AND event_id = ? AND item = ? AND kind IN ('resolution', 'outcome')
  ORDER BY id DESC LIMIT 1

-- name: FindStaleEntries
SELECT source, event_id, holder_execution_id
  FROM webhook_events
  WHERE status = 'processing' AND review_reason = '' AND updated_at < ?
  AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
  ORDER BY updated_at LIMIT 100

-- name: Count
INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  VALUES (?, ?, ?, ?, ?, 1)
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + 1

-- name: ReadWorkflow
SELECT workflow_id FROM executions WHERE execution_id = ?

-- name: CountReviewQueueByWorkflow
SELECT w.source,
  COALESCE(x.workflow_id, '') AS workflow_id, count(*) AS n
  FROM webhook_events w LEFT JOIN executions x ON x.execution_id = w.holder_execution_id
  WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < ?) AND (? = '' OR w.source = ?)
  GROUP BY w.source, COALESCE(x.workflow_id, '')

-- name: OverviewReviewQueue
SELECT source, event_id, review_reason, updated_at
  FROM webhook_events WHERE status = 'processing' AND (review_reason <> '' OR updated_at < ?)
  AND (? = '' OR source = ?) ORDER BY updated_at LIMIT 1000

-- name: ReadResolutions
SELECT resolved_at, source, seconds
  FROM resolution_times WHERE resolved_at >= ? AND resolved_at <= ? AND (? = '' OR source = ?)
  ORDER BY resolved_at

-- name: CountAlertsByKind
SELECT alert_kind, state, count(*) AS n FROM outbox
  WHERE kind = 'alert' AND created_at >= ? AND created_at <= ? AND (? = '' OR source = ?)
  GROUP BY alert_kind, state ORDER BY alert_kind, state

-- name: ReadOldHours
SELECT DISTINCT hour FROM stats_hourly WHERE hour < ?

-- name: FoldHoursIntoDays
INSERT INTO stats_daily (day, source, workflow_id, metric, n)
  SELECT ?, source, workflow_id, metric, sum(n) FROM stats_hourly WHERE hour >= ? AND hour < ?
  GROUP BY source, workflow_id, metric
  ON CONFLICT (day, source, workflow_id, metric) DO UPDATE SET n = stats_daily.n + excluded.n

-- name: DeleteFoldedHours
DELETE FROM stats_hourly WHERE hour >= ? AND hour < ?

-- name: ForgetOldDays
DELETE FROM stats_daily WHERE day < ?

-- name: ReadReviewStart
SELECT at FROM event_history
  WHERE source = ? AND event_id = ? AND item = ? AND ((kind = 'outcome' AND decision = 'unknown') OR kind = 'error')
  ORDER BY id DESC LIMIT 1

-- name: RecordResolution
INSERT INTO resolution_times (resolved_at, source, seconds)
  VALUES (?, ?, ?)

-- name: InsertItemEvent
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, item_count,
  created_at, updated_at, last_seen_at)
  VALUES (:source, :event_id, 'processing', :holder, 1, :now, :now, :now)
  ON CONFLICT (source, event_id) DO NOTHING
  RETURNING true

-- name: LockItemEvent
UPDATE webhook_events SET last_seen_at = :now
  WHERE source = :source AND event_id = :event_id
  RETURNING item_count

-- name: ReadPresented
SELECT first_workflow_id, last_delivery_id,
  last_presented_at, fingerprint FROM webhook_events WHERE source = ? AND event_id = ?

-- name: PresentExecution
INSERT INTO event_executions (source, event_id, execution_id, role, delivery, acted, delivery_id,
  workflow_id, class, first_seen_at)
  VALUES (:source, :event_id, :execution_id, 'claim', :delivery, :acted, :delivery_id, :workflow_id, :class, :now)
  ON CONFLICT (source, event_id, execution_id) DO UPDATE SET role = 'claim', delivery = excluded.delivery,
  acted = event_executions.acted OR excluded.acted, delivery_id = excluded.delivery_id,
  workflow_id = excluded.workflow_id, class = excluded.class
  WHERE event_executions.role <> 'claim'
  RETURNING execution_id

-- name: MarkActed
UPDATE event_executions SET acted = true
  WHERE source = :source AND event_id = :event_id AND execution_id = :execution_id AND NOT acted

-- name: CountDelivery
UPDATE webhook_events SET deliveries = deliveries + :new,
  fingerprint = CASE WHEN fingerprint = '' THEN :fingerprint ELSE fingerprint END,
  first_workflow_id = CASE WHEN first_workflow_id = '' AND :new = 1 THEN :workflow_id ELSE first_workflow_id END,
  last_delivery_id = CASE WHEN :new = 1 THEN :delivery_id ELSE last_delivery_id END,
  last_presented_at = CASE WHEN :new = 1 THEN :now ELSE last_presented_at END
  WHERE source = :source AND event_id = :event_id
  RETURNING deliveries, fingerprint


-- name: RollUp
UPDATE webhook_events SET status = :status, item_count = :count,
  updated_at = CASE WHEN status <> :status THEN :now ELSE updated_at END,
  review_reason = CASE WHEN :status <> 'processing' THEN '' ELSE review_reason END,
  holder_execution_id = CASE WHEN :holder <> '' THEN :holder ELSE holder_execution_id END
  WHERE source = :source AND event_id = :event_id
  RETURNING status, holder_execution_id, item_count

-- name: RecordError
INSERT INTO n8n_errors (dedupe_key, received_at, kind, execution_id, retry_of,
  root_execution_id, workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload,
  payload_truncated, intake_note)
  VALUES (:dedupe_key, :now, :kind, :execution_id, :retry_of, :root, :workflow_id, :workflow_name,
  :mode, :node, :message, :http_code, :url, :payload, :truncated, :note)
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING id

-- name: AttachError
UPDATE webhook_events SET last_seen_at = last_seen_at
  WHERE source = :source AND event_id = :event_id
  RETURNING status, holder_execution_id, item_count

-- name: HoldsAny
SELECT EXISTS (SELECT 1 FROM event_items
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND holder_execution_id IN (:chain))

-- name: JoinGroup
INSERT INTO alert_groups (group_key, kind,
  workflow_id, node, thread_key, opened_at, closes_at) VALUES (:key, :kind, :workflow_id, :node, :thread, :now, :closes)
  ON CONFLICT (group_key) DO UPDATE SET thread_key = excluded.thread_key, opened_at = excluded.opened_at,
  closes_at = excluded.closes_at, reply_due_at = NULL
  WHERE alert_groups.closes_at <= :now
  RETURNING thread_key



-- name: AddHistory
INSERT INTO event_history (source, event_id, item, at, kind, execution_id, retry_of,
  workflow_id, workflow_name, node, decision, delivery, class, status, actor, message, crm_ref, error_id)
  VALUES (:source, :event_id, :item, :at, :kind, :execution_id, :retry_of,
  :workflow_id, :workflow_name, :node, :decision, :delivery, :class, :status, :actor, :message, :crm_ref, :error_id)
  RETURNING id

-- name: TakeLease
INSERT INTO job_leases (name, owner, lease_until)
  VALUES (:name, :owner, :until)
  ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
  WHERE job_leases.owner = excluded.owner OR job_leases.lease_until < :now
  RETURNING owner

-- name: ReadRootExecution
SELECT root_execution_id FROM executions WHERE execution_id = :id

-- name: UpsertExecution
INSERT INTO executions (execution_id, n8n_id, incarnation, workflow_id, workflow_name, mode, retry_of,
  claimed_retry_of, root_execution_id, n8n_url, lineage_note, first_seen_at, last_seen_at, started_at, checked_at,
  ended_at, n8n_status, hook_reports)
  VALUES (:id, :raw_id, :incarnation, :workflow_id, :workflow_name, :mode, :retry_of, :claimed_retry_of, :root, :url,
  :note, :now, :now, :started_at, :checked_at, :ended_at, :status, :hook)
  ON CONFLICT (execution_id) DO UPDATE SET
{{execution_merge}},
  n8n_url = CASE WHEN excluded.n8n_url <> '' THEN excluded.n8n_url ELSE executions.n8n_url END,
  root_execution_id = CASE WHEN executions.retry_of <> '' THEN executions.root_execution_id
  WHEN excluded.root_execution_id <> excluded.execution_id THEN excluded.root_execution_id
  ELSE executions.root_execution_id END,
  retry_of = CASE WHEN executions.retry_of = '' THEN excluded.retry_of ELSE executions.retry_of END,
  started_at = COALESCE(executions.started_at, excluded.started_at),
  checked_at = COALESCE(excluded.checked_at, executions.checked_at),
  ended_at = COALESCE(executions.ended_at, excluded.ended_at),
  n8n_status = CASE WHEN excluded.n8n_status <> '' THEN excluded.n8n_status ELSE executions.n8n_status END,
  hook_reports = executions.hook_reports + excluded.hook_reports
  RETURNING retry_of

-- name: ReadCurrentExecution
SELECT execution_id, n8n_id, incarnation, workflow_id, retry_of, n8n_status, first_seen_at, last_seen_at, started_at,
  ended_at, checked_at FROM executions WHERE n8n_id = :raw_id AND superseded_at IS NULL

-- name: SupersedeExecution
UPDATE executions SET superseded_at = :now WHERE execution_id = :id AND superseded_at IS NULL

-- name: OtherEventHolder
SELECT w.holder_execution_id FROM webhook_events w
  WHERE w.source = :source AND w.event_id = :event_id AND w.status IN (:statuses) AND w.item_count = 0
  AND w.holder_execution_id <> '' AND w.holder_execution_id <> :caller

-- name: OtherItemHolder
SELECT i.holder_execution_id FROM event_items i
  WHERE i.source = :source AND i.event_id = :event_id AND i.item IN (:items) AND i.status IN (:statuses)
  AND i.holder_execution_id <> '' AND i.holder_execution_id <> :caller
  ORDER BY i.updated_at DESC LIMIT 1


-- name: Finish
UPDATE webhook_events SET last_seen_at = :now
  WHERE source = :source AND event_id = :event_id
  RETURNING item_count

-- name: KeepEventEvidence
UPDATE webhook_events SET review_reason = 'not_holder'
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND review_reason = ''

-- name: KeepItemEvidence
UPDATE event_items SET review_reason = 'not_holder'
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
  AND review_reason = ''

-- name: ClaimSlot
INSERT INTO slack_channels (channel, next_at)
  VALUES (:channel, :next)
  ON CONFLICT (channel) DO UPDATE SET next_at = excluded.next_at WHERE slack_channels.next_at <= :now
  RETURNING next_at

-- name: CountEventExecutions
SELECT count(*) FROM event_executions WHERE source = ? AND event_id = ?

-- name: CountEventErrors
SELECT count(*) FROM n8n_errors WHERE source = ? AND event_id = ?

-- name: ResendAfterChange
INSERT INTO service_state (name, value, updated_at)
  VALUES (:name, :value, :now)
  ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
  WHERE service_state.value <> excluded.value
  RETURNING name

-- name: WaitingAlerts
SELECT count(*) FROM outbox WHERE created_at >= :since AND (state = 'unconfigured'
  OR (state = 'dead' AND last_error LIKE :config_errors))

-- name: PruneGroupThreads
DELETE FROM slack_threads WHERE thread_key IN (
  SELECT thread_key FROM slack_threads WHERE thread_key LIKE 'group::%' AND created_at < :before LIMIT :batch)

-- name: PruneGroups
DELETE FROM alert_groups WHERE group_key IN (
  SELECT group_key FROM alert_groups WHERE closes_at < :before LIMIT :batch)

-- name: PruneEventErrors
DELETE FROM n8n_errors WHERE source = :source AND event_id = :event_id
  AND NOT EXISTS (SELECT 1 FROM event_history h WHERE h.error_id = n8n_errors.id
  AND NOT (h.source = :source AND h.event_id = :event_id))

-- name: RelinkEventErrors
UPDATE n8n_errors SET (source, event_id) = (SELECT h.source, h.event_id
  FROM event_history h WHERE h.error_id = n8n_errors.id AND NOT (h.source = :source AND h.event_id = :event_id)
  ORDER BY h.id LIMIT 1)
  WHERE source = :source AND event_id = :event_id

-- name: PruneEventAlerts
DELETE FROM outbox WHERE source = :source AND event_id = :event_id

-- name: PruneEventThread
DELETE FROM slack_threads WHERE thread_key = :thread

-- name: PruneErrorAlerts
DELETE FROM outbox WHERE error_id IN (?)

-- name: PruneErrorThreads
DELETE FROM slack_threads WHERE thread_key IN (?)

-- name: PruneErrors
DELETE FROM n8n_errors WHERE id IN (?) AND source IS NULL

-- name: DetectStale
UPDATE webhook_events SET stale_alerted_at = :now
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND updated_at < :cutoff
  AND holder_execution_id = :holder AND review_reason = ''
  AND (stale_alerted_at IS NULL OR stale_alerted_at < updated_at)
  RETURNING status, holder_execution_id, item_count

-- name: DeleteScratchOutbox
DELETE FROM outbox WHERE source IN (:sources)

-- name: DeleteScratchEvents
DELETE FROM webhook_events WHERE source IN (:sources)

-- name: DeleteScratchErrors
DELETE FROM n8n_errors WHERE execution_id LIKE :executions

-- name: DeleteScratchExecutions
DELETE FROM executions WHERE execution_id LIKE :executions

-- name: OverviewHours
SELECT hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_hourly
  WHERE hour >= ? AND hour <= ? AND (? = '' OR source = ?) GROUP BY hour, metric ORDER BY hour, metric

-- name: OverviewDays
SELECT day AS hour, '' AS source, '' AS workflow_id, metric, sum(n) AS n FROM stats_daily
  WHERE day >= ? AND day <= ? AND (? = '' OR source = ?) GROUP BY day, metric ORDER BY day, metric

-- name: OverviewByWorkflow
SELECT source, workflow_id, metric, sum(n) AS n FROM (
  SELECT source, workflow_id, metric, n FROM stats_hourly WHERE hour >= ? AND hour <= ? AND (? = '' OR source = ?)
  UNION ALL
  SELECT source, workflow_id, metric, n FROM stats_daily WHERE day >= ? AND day <= ? AND (? = '' OR source = ?)
  ) c GROUP BY source, workflow_id, metric ORDER BY source, workflow_id, metric

-- name: MergeShards
INSERT INTO stats_hourly (hour, source, workflow_id, metric, shard, n)
  SELECT hour, source, workflow_id, metric, 0, sum(n) FROM stats_hourly WHERE hour < ? AND shard <> 0
  GROUP BY hour, source, workflow_id, metric
  ON CONFLICT (hour, source, workflow_id, metric, shard) DO UPDATE SET n = stats_hourly.n + excluded.n

-- name: DeleteMergedShards
DELETE FROM stats_hourly WHERE hour < ? AND shard <> 0

-- name: InsertEvent
INSERT INTO webhook_events (source, event_id, status, holder_execution_id, created_at, updated_at, last_seen_at)
  VALUES (:source, :event_id, 'processing', :holder, :now, :now, :now)
  ON CONFLICT (source, event_id) DO NOTHING
  RETURNING status, holder_execution_id, item_count

-- name: ReclaimEvent
UPDATE webhook_events SET status = 'processing', holder_execution_id = :holder,
  updated_at = :now, last_seen_at = :now, review_reason = ''
  WHERE source = :source AND event_id = :event_id AND status = 'failed' AND item_count = 0
  RETURNING status, holder_execution_id, item_count

-- name: HoldEvent
UPDATE webhook_events SET holder_execution_id = :holder, last_seen_at = :now,
  updated_at = CASE WHEN holder_execution_id = :holder THEN updated_at ELSE :now END,
  review_reason = CASE WHEN holder_execution_id = :holder THEN review_reason ELSE '' END,
  stale_alerted_at = CASE WHEN holder_execution_id = :holder THEN stale_alerted_at ELSE NULL END
  WHERE source = :source AND event_id = :event_id AND status = 'processing' AND item_count = 0
  AND holder_execution_id IN (:chain)
  RETURNING status, holder_execution_id, item_count

-- name: TouchEvent
UPDATE webhook_events SET last_seen_at = :now
  WHERE source = :source AND event_id = :event_id
  RETURNING status, holder_execution_id, item_count

-- name: InsertItem
INSERT INTO event_items (source, event_id, item, status, holder_execution_id, created_at, updated_at)
  VALUES (:source, :event_id, :item, 'processing', :holder, :now, :now)
  ON CONFLICT (source, event_id, item) DO NOTHING
  RETURNING status, holder_execution_id, 0 AS item_count

-- name: ReclaimItem
UPDATE event_items SET status = 'processing', holder_execution_id = :holder, updated_at = :now,
  review_reason = ''
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'failed'
  RETURNING status, holder_execution_id, 0 AS item_count

-- name: HoldItem
UPDATE event_items SET holder_execution_id = :holder,
  updated_at = CASE WHEN holder_execution_id = :holder THEN updated_at ELSE :now END,
  review_reason = CASE WHEN holder_execution_id = :holder THEN review_reason ELSE '' END
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
  AND holder_execution_id IN (:chain)
  RETURNING status, holder_execution_id, 0 AS item_count

-- name: ReadItem
SELECT status, holder_execution_id, 0 AS item_count FROM event_items
  WHERE source = :source AND event_id = :event_id AND item = :item

-- name: FinishEvent
UPDATE webhook_events SET status = :status, holder_execution_id = :reporter, updated_at = :now,
  last_seen_at = :now, review_reason = '', crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item_count = 0
  AND (holder_execution_id IN (:chain) OR holder_execution_id = '')
  AND (status = 'processing' OR (status = 'failed' AND holder_execution_id <> :reporter))
  AND review_reason <> 'contradiction'
  RETURNING status, holder_execution_id, item_count, review_reason

-- name: UnknownEvent
UPDATE webhook_events SET status = 'processing', holder_execution_id = :reporter,
  updated_at = CASE WHEN status = 'processing' THEN updated_at ELSE :now END,
  review_reason = 'unknown', last_seen_at = :now,
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item_count = 0
  AND (holder_execution_id IN (:chain) OR holder_execution_id = '')
  AND ((status = 'processing' AND (review_reason <> 'unknown' OR holder_execution_id <> :reporter))
  OR (status = 'failed' AND holder_execution_id <> :reporter))
  AND review_reason <> 'contradiction'
  RETURNING status, holder_execution_id, item_count, review_reason

-- name: ReadFinishedEvent
SELECT status, holder_execution_id, item_count, review_reason FROM webhook_events
  WHERE source = :source AND event_id = :event_id

-- name: FinishItem
UPDATE event_items SET status = :status, holder_execution_id = :reporter, updated_at = :now,
  review_reason = '', crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item
  AND (holder_execution_id IN (:chain) OR holder_execution_id = '')
  AND (status = 'processing' OR (status = 'failed' AND holder_execution_id <> :reporter))
  AND review_reason <> 'contradiction'
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason

-- name: UnknownItem
UPDATE event_items SET status = 'processing', holder_execution_id = :reporter,
  updated_at = CASE WHEN status = 'processing' THEN updated_at ELSE :now END, review_reason = 'unknown',
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item
  AND (holder_execution_id IN (:chain) OR holder_execution_id = '')
  AND ((status = 'processing' AND (review_reason <> 'unknown' OR holder_execution_id <> :reporter))
  OR (status = 'failed' AND holder_execution_id <> :reporter))
  AND review_reason <> 'contradiction'
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason

-- name: ReadFinishedItem
SELECT status, holder_execution_id, 1 AS item_count, review_reason FROM event_items
  WHERE source = :source AND event_id = :event_id AND item = :item

-- name: ResolveEvent
UPDATE webhook_events SET status = :status, updated_at = :now, last_seen_at = :now, review_reason = '',
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item_count = 0 AND status = 'processing'
  AND holder_execution_id = :holder AND (:confirmed OR review_reason <> '' OR updated_at < :cutoff)
  RETURNING status, holder_execution_id, item_count, review_reason

-- name: ResolveItem
UPDATE event_items SET status = :status, updated_at = :now, review_reason = '',
  crm_ref = CASE WHEN :crm_ref <> '' THEN :crm_ref ELSE crm_ref END
  WHERE source = :source AND event_id = :event_id AND item = :item AND status = 'processing'
  AND holder_execution_id = :holder AND (:confirmed OR review_reason <> '' OR updated_at < :cutoff)
  RETURNING status, holder_execution_id, 1 AS item_count, review_reason

-- The errors of an alert group: kind, workflow and node, linked to no event,
-- received in the group's window.
-- name: GroupCount
SELECT count(*) FROM n8n_errors
  WHERE kind = ? AND workflow_id = ? AND node = ? AND source IS NULL AND received_at >= ? AND received_at < ?

-- name: GroupFirst
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors
  WHERE kind = ? AND workflow_id = ? AND node = ? AND source IS NULL AND received_at >= ? AND received_at < ?
  ORDER BY id LIMIT 1

-- name: GroupLast
SELECT id, dedupe_key, received_at, kind, execution_id, retry_of, root_execution_id,
  workflow_id, workflow_name, mode, node, message, http_code, n8n_url, payload_truncated,
  payload_dropped, intake_note, source, event_id FROM n8n_errors
  WHERE kind = ? AND workflow_id = ? AND node = ? AND source IS NULL AND received_at >= ? AND received_at < ?
  ORDER BY id DESC LIMIT 1

-- RedactStored walks the columns that hold text from n8n, 200 rows at a
-- time, and writes back what today's rules redact. Keys compare as numbers
-- for ids and as text for executions and groups.
-- name: ReadN8nErrorsMessage
SELECT id AS k, message AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactN8nErrorsMessage
UPDATE n8n_errors SET message = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadN8nErrorsN8nUrl
SELECT id AS k, n8n_url AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactN8nErrorsN8nUrl
UPDATE n8n_errors SET n8n_url = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadN8nErrorsPayload
SELECT id AS k, payload AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactN8nErrorsPayload
UPDATE n8n_errors SET payload = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadN8nErrorsWorkflowName
SELECT id AS k, workflow_name AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactN8nErrorsWorkflowName
UPDATE n8n_errors SET workflow_name = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadN8nErrorsNode
SELECT id AS k, node AS v FROM n8n_errors WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactN8nErrorsNode
UPDATE n8n_errors SET node = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadEventHistoryMessage
SELECT id AS k, message AS v FROM event_history WHERE id > CAST(? AS BIGINT) AND kind IN ('error', 'outcome', 'not_holder') ORDER BY id LIMIT 200

-- name: RedactEventHistoryMessage
UPDATE event_history SET message = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadEventHistoryWorkflowName
SELECT id AS k, workflow_name AS v FROM event_history WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactEventHistoryWorkflowName
UPDATE event_history SET workflow_name = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadEventHistoryNode
SELECT id AS k, node AS v FROM event_history WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactEventHistoryNode
UPDATE event_history SET node = ? WHERE id = CAST(? AS BIGINT)

-- name: ReadExecutionsN8nUrl
SELECT execution_id AS k, n8n_url AS v FROM executions WHERE execution_id > ? ORDER BY execution_id LIMIT 200

-- name: RedactExecutionsN8nUrl
UPDATE executions SET n8n_url = ? WHERE execution_id = ?

-- name: ReadExecutionsWorkflowName
SELECT execution_id AS k, workflow_name AS v FROM executions WHERE execution_id > ? ORDER BY execution_id LIMIT 200

-- name: RedactExecutionsWorkflowName
UPDATE executions SET workflow_name = ? WHERE execution_id = ?

-- name: ReadAlertGroupsNode
SELECT group_key AS k, node AS v FROM alert_groups WHERE group_key > ? ORDER BY group_key LIMIT 200

-- name: RedactAlertGroupsNode
UPDATE alert_groups SET node = ? WHERE group_key = ?

-- name: ReadOutboxPayload
SELECT id AS k, payload AS v FROM outbox WHERE id > CAST(? AS BIGINT) ORDER BY id LIMIT 200

-- name: RedactOutboxPayload
UPDATE outbox SET payload = ? WHERE id = CAST(? AS BIGINT)
