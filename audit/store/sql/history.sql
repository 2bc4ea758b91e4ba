-- Each entry's history (event_history). The format of these files:
-- catalogue.go.

-- name: HistoryCount
SELECT kind, count(*) AS n FROM event_history WHERE source = :source AND event_id = :event_id GROUP BY kind

-- name: HistoryReadLastSettlement
SELECT id, source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name, node, decision,
  delivery, status, actor, message, error_id
  FROM event_history WHERE source = :source AND event_id = :event_id AND kind IN ('outcome', 'resolution')
  ORDER BY id DESC LIMIT 1

-- fragment: history_columns
id, source, event_id, item, at, kind, execution_id, retry_of, workflow_id, workflow_name, node, decision,
  delivery, class, status, actor, message, crm_ref, error_id, version

-- name: HistoryReadPage
SELECT {{history_columns}} FROM event_history
  WHERE source = :source AND event_id = :event_id AND id < :before ORDER BY id DESC LIMIT :limit

-- name: HistoryReadRefusedReports
SELECT {{history_columns}} FROM event_history
  WHERE source = :source AND event_id = :event_id AND kind = 'not_holder' ORDER BY id DESC LIMIT 20

-- name: HistoryReadReviewQueue
SELECT {{event_columns}},
  COALESCE((SELECT h.message FROM event_history h WHERE h.source = w.source AND h.event_id = w.event_id
  AND h.kind IN ('error', 'outcome', 'stale', 'not_holder') ORDER BY h.id DESC LIMIT 1), '') AS last_news
  FROM webhook_events w
  WHERE w.status = 'processing' AND (w.review_reason <> '' OR w.updated_at < :cutoff)
  ORDER BY w.updated_at, w.source, w.event_id LIMIT :limit
