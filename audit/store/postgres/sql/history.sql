-- Each entry's history (event_history).
--
-- PostgreSQL's statements where it differs from SQLite (the rest are in
-- ../../sql/, in the file of the same name): row locks that skip what
-- another session holds, batches as one data-modifying statement, typed
-- parameters. The files' format is ../../sql/'s.

-- PostgreSQL: empty: ClaimBatchWrite writes the history with the rest.
-- name: HistoryBatchInsertClaims

-- PostgreSQL: empty: ErrorBatchWrite writes the history with the rest.
-- name: HistoryBatchInsertErrors

-- PostgreSQL: empty: OutcomeBatchWrite writes the history with the rest.
-- name: HistoryBatchInsertOutcomes
