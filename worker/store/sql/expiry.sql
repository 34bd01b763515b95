-- The expiry pass (worker/ops/expiry.py, run by worker/store/maintenance.py):
-- active facts whose expires_at has come are superseded with reason 'expired',
-- never deleted. Every pass may run beside
-- others (one per worker): each takes what no other holds (SKIP LOCKED) and
-- never waits on a row, so passes and commits cannot deadlock.

-- name: lock_due_users
-- The version rows of up to $1 users with facts due, locked in the order every
-- writer takes them (the version, then the facts). A row held by a commit in
-- flight or another pass is left for the next pass.
SELECT s.user_id
FROM user_memory_state AS s
WHERE s.user_id IN (SELECT f.user_id FROM memory_fact AS f
                    WHERE f.superseded_at IS NULL AND f.expires_at <= now())
ORDER BY s.user_id
LIMIT $1
FOR UPDATE OF s SKIP LOCKED;

-- name: expire_due
-- Up to $2 due facts of the users locked above ($1), or of users with no
-- version row yet, superseded as of their expiry: validity ends there too
-- (never before it began: the schema checks valid_to >= valid_from). Then the
-- version of every user whose rows were actually updated is bumped, so a
-- consolidation in flight reads again; an erased user has no rows to update,
-- so no version row is made again for them.
WITH due AS (
    SELECT f.user_id, f.id
    FROM memory_fact AS f
    WHERE f.superseded_at IS NULL AND f.expires_at <= now()
      AND (f.user_id = ANY($1::text[])
           OR NOT EXISTS (SELECT 1 FROM user_memory_state AS s WHERE s.user_id = f.user_id))
    ORDER BY f.expires_at, f.id
    LIMIT $2
    FOR UPDATE OF f SKIP LOCKED
), expired AS (
    UPDATE memory_fact AS f
    SET superseded_at = f.expires_at, superseded_reason = 'expired',
        valid_to = coalesce(f.valid_to, greatest(f.valid_from, f.expires_at))
    FROM due
    WHERE f.user_id = due.user_id AND f.id = due.id
    RETURNING f.user_id
), bumped AS (
    INSERT INTO user_memory_state AS s (user_id, version)
    SELECT DISTINCT e.user_id, 1 FROM expired AS e
    ON CONFLICT (user_id) DO UPDATE SET version = s.version + 1, updated_at = now()
)
SELECT count(*) AS expired FROM expired;
