-- Queries of `memfleet reembed` (worker/ops/reembed.py, run by
-- worker/store/maintenance.py): move every active fact to
-- another embedding model and dimension, one user per transaction. In the
-- queries on facts and moves, $1 is the model moved to and $2 its dimension.

-- name: try_lock
-- Held on a connection of its own for the whole move: a second reembed refuses
-- to start. A killed process's connection closes, and the lock goes with it.
SELECT pg_try_advisory_lock(hashtextextended('memfleet:reembed', 0));

-- name: unlock
SELECT pg_advisory_unlock(hashtextextended('memfleet:reembed', 0));

-- name: start
-- Records the move (a move run again keeps its count: it resumes). A move to
-- another model that was left unfinished is abandoned: only the newest one is
-- under way, so only its workers may boot (worker/store/migrate.py check_schema).
WITH abandoned AS (
    DELETE FROM memory_reembed
    WHERE finished_at IS NULL AND (model, dim) <> ($1::text, $2::integer)
)
INSERT INTO memory_reembed AS r (model, dim) VALUES ($1, $2)
ON CONFLICT (model, dim) DO UPDATE SET finished_at = NULL
RETURNING r.moved;

-- name: users_left
-- Users with an active row on another model or dimension, through the partial
-- index memory_fact_active_model_idx; $3 of them at a time.
SELECT DISTINCT user_id
FROM memory_fact
WHERE superseded_at IS NULL AND (embedding_model <> $1 OR embedding_dim <> $2)
ORDER BY user_id
LIMIT $3;

-- name: user_rows
-- One statement, one snapshot: the user's version and their active rows still
-- on another model or dimension. The move commits only if the version is still
-- this one, like a run's consolidation.
WITH state AS (
    SELECT coalesce((SELECT version FROM user_memory_state WHERE user_id = $3), 0) AS version
)
SELECT state.version, f.id, f.text
FROM state
LEFT JOIN memory_fact AS f
    ON f.user_id = $3 AND f.superseded_at IS NULL
   AND (f.embedding_model <> $1 OR f.embedding_dim <> $2)
ORDER BY f.id;

-- name: lock_user
-- The user's advisory lock, shared, as memfleet_commit_run takes it: an erase
-- (exclusive) either ends before this move or waits for it.
SELECT pg_advisory_xact_lock_shared(hashtextextended('memfleet:user:' || $1, 0));

-- name: bump_user_version
-- The compare-and-set every writer of a user's facts wins first
-- (schema/routines/memfleet_bump_user_version.sql). NULL: lost.
SELECT memfleet_bump_user_version($1, $2);

-- name: move_rows
-- The new embeddings in place: the text, the times and the chain stay as they
-- are (embeddings are derived data). Only rows still active are moved; the
-- caller compares the count with what it read.
UPDATE memory_fact AS f
SET embedding = m.embedding, embedding_model = $1
FROM unnest($4::bigint[], $5::halfvec[]) AS m (id, embedding)
WHERE f.id = m.id AND f.user_id = $3 AND f.superseded_at IS NULL
  AND vector_dims(m.embedding) = $2;

-- name: count_moved
UPDATE memory_reembed SET moved = moved + $3 WHERE model = $1 AND dim = $2;

-- name: verify
-- The end state: active rows, those on another model or dimension, and those of
-- another dimension alone.
SELECT count(*) AS active,
       count(*) FILTER (WHERE embedding_model <> $1 OR embedding_dim <> $2) AS other,
       count(*) FILTER (WHERE embedding_dim <> $2) AS other_dim
FROM memory_fact
WHERE superseded_at IS NULL;

-- name: finish
-- The fleet now embeds with $1 at $2: workers set up for the previous model
-- refuse to boot from here on (check_schema).
WITH done AS (
    UPDATE memory_reembed SET finished_at = now() WHERE model = $1 AND dim = $2
)
INSERT INTO memfleet_setting AS s (key, value)
VALUES ('embed_model', $1), ('embed_dim', $2::integer::text)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
