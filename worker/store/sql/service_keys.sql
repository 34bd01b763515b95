-- Service keys (schema/0010_service_keys.sql): the one cross-user table. No
-- query here reads or writes a user's memory.

-- name: create_key
INSERT INTO service_key (id, name, secret_hash, scopes)
VALUES ($1, $2, $3, $4)
RETURNING id, name, scopes, created_at, last_used_at, revoked_at;

-- name: list_keys
SELECT id, name, scopes, created_at, last_used_at, revoked_at
FROM service_key
ORDER BY created_at, id;

-- name: revoke_key
-- Revoking twice keeps the first time (was_revoked: it was already). No row: no such key.
WITH before AS (SELECT id, revoked_at FROM service_key WHERE id = $1 FOR UPDATE)
UPDATE service_key AS k SET revoked_at = coalesce(k.revoked_at, now())
FROM before
WHERE k.id = before.id
RETURNING k.id, k.name, k.scopes, k.created_at, k.last_used_at, k.revoked_at,
          before.revoked_at IS NOT NULL AS was_revoked;

-- name: key_ids
-- Every key id, revoked ones too (a revoked key is refused as revoked); $1 caps the read.
SELECT id FROM service_key ORDER BY id LIMIT $1;

-- name: key_for_check
SELECT secret_hash, scopes, revoked_at IS NOT NULL AS revoked
FROM service_key
WHERE id = $1;

-- name: touch_key
-- At most once every $2 seconds, whichever API process gets there first.
UPDATE service_key SET last_used_at = now()
WHERE id = $1 AND revoked_at IS NULL
  AND (last_used_at IS NULL OR last_used_at < now() - make_interval(secs => $2));
