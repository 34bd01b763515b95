-- Migration bookkeeping (worker/store/migrate.py). The advisory lock key is a
-- constant: every replica running `memfleet migrate` at once queues behind the first.

-- name: lock
SELECT pg_advisory_lock(724110455);

-- name: unlock
SELECT pg_advisory_unlock(724110455);

-- name: ensure_tables
CREATE TABLE IF NOT EXISTS memfleet_migration (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS memfleet_routine (
    name       text PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied
SELECT version, name, checksum FROM memfleet_migration ORDER BY version;

-- name: record
INSERT INTO memfleet_migration (version, name, checksum) VALUES ($1, $2, $3);

-- name: routines
SELECT name, checksum FROM memfleet_routine;

-- name: record_routine
INSERT INTO memfleet_routine AS r (name, checksum) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now();

-- name: embed_dim
SELECT value FROM memfleet_setting WHERE key = 'embed_dim';

-- name: pg_partitions
-- How many hash partitions the per-user tables were given (schema/0013).
SELECT value FROM memfleet_setting WHERE key = 'pg_partitions';

-- name: embed_model
-- The model the fleet embeds with; none until `memfleet reembed` finished a move.
SELECT value FROM memfleet_setting WHERE key = 'embed_model';

-- name: moves_under_way
-- Moves `memfleet reembed` started and has not finished (worker/ops/reembed.py).
SELECT model, dim FROM memory_reembed WHERE finished_at IS NULL ORDER BY started_at;
