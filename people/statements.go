package people

// The statements of this package, named parameters only; each runs on
// SQLite and PostgreSQL alike (the times they compare are passed as the
// store stores them: store.Time). '::' is sqlx's escape of a colon: ':'.
const (
	// actionInsert writes an action that touches no entry.
	actionInsert = `INSERT INTO people_actions (at, actor, via, action, source, event_id, detail)
VALUES (:at, :actor, :via, :action, :source, :event_id, :detail)`

	// actionPrune forgets the actions older than the retention.
	actionPrune = `DELETE FROM people_actions WHERE at < :before`

	// lookupLatest is an entry's newest lookup line (event_history_event
	// serves it).
	lookupLatest = `SELECT at, decision, crm_ref, actor, delivery, message, version
FROM event_history
WHERE source = :source AND event_id = :event_id AND item = :item AND kind = 'lookup'
ORDER BY id DESC LIMIT 1`

	// logRead is the audit log: people's lines of the event history (the
	// ones with an actor; event_history_actor_at serves them in time
	// order) and the actions that touch no entry (people_actions_at), newest
	// first, from a cursor (at, origin, id), in one read.
	logRead = `SELECT origin, id, at, actor, via, action, source, event_id, item, crm_ref, detail FROM (
  SELECT 'h' AS origin, h.id, h.at, h.actor,
    CASE WHEN h.delivery = '' THEN 'page' ELSE h.delivery END AS via,
    CASE WHEN h.decision = '' THEN h.kind ELSE h.kind || '::' || h.decision END AS action,
    h.source, h.event_id, h.item, h.crm_ref, h.message AS detail
  FROM event_history h
  WHERE h.actor <> '' AND h.at >= :from AND h.at < :until
    AND (:actor = '' OR h.actor = :actor) AND (:source = '' OR h.source = :source)
    AND (:action = '' OR h.kind = :action OR h.kind || '::' || h.decision = :action)
    AND (h.at < :cursor_at OR (h.at = :cursor_at AND (:cursor_origin > 'h' OR (:cursor_origin = 'h' AND h.id < :cursor_id))))
  ORDER BY h.at DESC, h.id DESC LIMIT :limit
) hist
UNION ALL
SELECT origin, id, at, actor, via, action, source, event_id, item, crm_ref, detail FROM (
  SELECT 'p' AS origin, p.id, p.at, p.actor, p.via, p.action, p.source, p.event_id, '' AS item, '' AS crm_ref,
    p.detail
  FROM people_actions p
  WHERE p.at >= :from AND p.at < :until
    AND (:actor = '' OR p.actor = :actor) AND (:source = '' OR p.source = :source)
    AND (:action = '' OR p.action = :action OR substr(p.action, 1, length(:action) + 1) = :action || '::')
    AND (p.at < :cursor_at OR (p.at = :cursor_at AND (:cursor_origin > 'p' OR (:cursor_origin = 'p' AND p.id < :cursor_id))))
  ORDER BY p.at DESC, p.id DESC LIMIT :limit
) acts
ORDER BY at DESC, origin DESC, id DESC LIMIT :limit`
)
