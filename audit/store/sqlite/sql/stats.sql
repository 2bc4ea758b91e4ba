-- Counters (stats_hourly, stats_daily), resolution times and the overview.
--
-- SQLite's statements where it differs from PostgreSQL (the rest are in
-- ../../sql/, in the file of the same name). Each says where and why it
-- differs. The files' format is ../../sql/'s.

-- SQLite: empty: the overview reads outside a transaction, which would take
-- the write lock.
-- name: OverviewSnapshot