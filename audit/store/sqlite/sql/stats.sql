-- Counters (stats_hourly, stats_daily) and the overview. SQLite's
-- statements where it differs from PostgreSQL: the rest are in ../../sql/.

-- SQLite: empty: the overview reads outside a transaction, which would take
-- the write lock.
-- name: OverviewSnapshot