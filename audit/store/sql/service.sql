-- The service's own state (service_state), job leases (job_leases) and
-- the savepoint of a request a batch runs alone.
--
-- Where PostgreSQL and SQLite agree; where they differ, the statement is
-- in each driver's sql/ folder, in the file of the same name. Each
-- statement follows a line "-- name: Name"; the store's queries struct has
-- a field of that name. Placeholders are ? (rebound by sqlx) or :name. A
-- piece several statements share follows a line "-- fragment: name", in
-- any of the files, and "{{name}}" in a statement stands for it.

-- name: LeaseRelease
DELETE FROM job_leases WHERE name = :name AND owner = :owner

-- name: LeaseTake
INSERT INTO job_leases (name, owner, lease_until)
  VALUES (:name, :owner, :until)
  ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
  WHERE job_leases.owner = excluded.owner OR job_leases.lease_until < :now
  RETURNING owner

-- name: StateChanged
INSERT INTO service_state (name, value, updated_at)
  VALUES (:name, :value, :now)
  ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
  WHERE service_state.value <> excluded.value
  RETURNING name

-- name: StateCreateSecret
INSERT INTO service_state (name, value, updated_at)
  VALUES (:name, :value, :now) ON CONFLICT (name) DO NOTHING

-- name: StateRead
SELECT value FROM service_state WHERE name = ?

-- name: StateWrite
INSERT INTO service_state (name, value, updated_at)
  VALUES (:name, :value, :now)
  ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
