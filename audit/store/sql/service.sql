-- The service's own state (service_state) and job leases (job_leases). The
-- format of these files: catalogue.go.

-- name: LeaseRelease
DELETE FROM job_leases WHERE name = :name AND owner = :owner

-- name: LeaseTake
INSERT INTO job_leases (name, owner, lease_until) VALUES (:name, :owner, :until)
  ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
  WHERE job_leases.owner = excluded.owner OR job_leases.lease_until < :now
  RETURNING owner

-- name: StateChanged
INSERT INTO service_state (name, value, updated_at) VALUES (:name, :value, :now)
  ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
  WHERE service_state.value <> excluded.value
  RETURNING name

-- name: StateCreateSecret
INSERT INTO service_state (name, value, updated_at) VALUES (:name, :value, :now) ON CONFLICT (name) DO NOTHING

-- name: StateRead
SELECT value FROM service_state WHERE name = :name

-- name: StateWrite
INSERT INTO service_state (name, value, updated_at) VALUES (:name, :value, :now)
  ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
