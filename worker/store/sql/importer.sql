-- Queries of `memfleet import` (worker/ops/importer.py, worker/store/imports.py).
-- Every query on facts is scoped to one user by its first parameter.

-- name: fences
-- The erase fences on record when an import starts: a user erased after this
-- (a fence that is new or moved) is not written again by that import.
SELECT user_key, erased_at FROM memory_erasure_fence;

-- name: known_keys
-- Which of ($1[i], $2[i]) (user, import key) are stored already, superseded rows too.
SELECT k.user_id, k.import_key
FROM unnest($1::text[], $2::text[]) AS k (user_id, import_key)
WHERE EXISTS (SELECT 1 FROM memory_fact AS f
              WHERE f.user_id = k.user_id AND f.import_key = k.import_key);

-- name: imported_blobs
-- Which of ($1[i], $2[i]) (user, blob prefix) already gave a row: a legacy blob's
-- facts are written in one transaction, so one row means the whole blob.
SELECT b.user_id, b.prefix
FROM unnest($1::text[], $2::text[]) AS b (user_id, prefix)
WHERE EXISTS (SELECT 1 FROM memory_fact AS f
              WHERE f.user_id = b.user_id AND starts_with(f.import_key, b.prefix));

-- name: active_texts
-- The texts a new fact would repeat: the user's active, unexpired facts, with
-- their agent (NULL: profile), over every user of $1.
SELECT user_id, agent_id, text
FROM memory_fact
WHERE user_id = ANY($1::text[]) AND {{active}};

-- name: lock_user_shared
-- Shared, as memfleet_commit_run takes it: an erase or a consent change (exclusive)
-- waits for this transaction, and it for them.
SELECT pg_advisory_xact_lock_shared(hashtextextended('memfleet:user:' || $1, 0));

-- name: user_gate
-- Under the lock: the user's erase fence (NULL: none; $3 the user's fence key,
-- worker.store.fence_key), whether memory is on ($2: the fleet's default for a user
-- who never chose), and their version.
SELECT (SELECT erased_at FROM memory_erasure_fence WHERE user_key = $3::bytea) AS erased_at,
       coalesce((SELECT enabled FROM user_memory_consent WHERE user_id = $1), $2) AS enabled,
       coalesce((SELECT version FROM user_memory_state WHERE user_id = $1), 0) AS version;

-- name: bump_user_version
SELECT memfleet_bump_user_version($1, $2);

-- name: insert_facts
-- A row whose import key the user has already (an earlier run, or a line
-- repeated) is left out, not an error.
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_kind, scope, agent_id, valid_from, valid_to,
                         expires_at, pinned, basis, confidence, import_key)
SELECT $1, t.text, t.category, t.importance, t.embedding, $2, t.observed_at, $3, t.scope,
       t.agent_id, coalesce(t.valid_from, t.observed_at), t.valid_to, t.expires_at, t.pinned,
       t.basis, t.confidence, t.import_key
FROM unnest($4::text[], $5::text[], $6::smallint[], $7::halfvec[], $8::timestamptz[],
            $9::text[], $10::text[], $11::timestamptz[], $12::timestamptz[],
            $13::timestamptz[], $14::boolean[], $15::text[], $16::real[], $17::text[])
     WITH ORDINALITY AS t (text, category, importance, embedding, observed_at, scope,
                           agent_id, valid_from, valid_to, expires_at, pinned, basis,
                           confidence, import_key, ord)
ORDER BY t.ord
ON CONFLICT (user_id, import_key) WHERE import_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: user_gates
-- Per user of $1: whether memory is on ($2: the fleet's default for a user who
-- never chose) and their erase fence (NULL: none; $3 the users' fence keys, in
-- the order of $1). Read before any of a user's text goes to a model;
-- user_gate decides again under the lock.
SELECT u.user_id,
       coalesce((SELECT enabled FROM user_memory_consent AS c WHERE c.user_id = u.user_id),
                $2) AS enabled,
       (SELECT erased_at FROM memory_erasure_fence AS f WHERE f.user_key = u.fence_key)
           AS erased_at
FROM unnest($1::text[], $3::bytea[]) AS u (user_id, fence_key);
