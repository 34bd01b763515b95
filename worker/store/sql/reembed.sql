-- Queries of `memfleet reembed` (worker/ops/reembed.py, run by
-- worker/store/maintenance.py): move every active fact and every active note
-- (docs/notes.md) to another embedding model and dimension, one user per
-- transaction. In the queries on facts, notes and moves, $1 is the model moved
-- to and $2 its dimension.

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
-- Users with an active fact or note on another model or dimension, $3 of them
-- at a time: the facts through the partial index memory_fact_active_model_idx,
-- the notes through memory_note_active_user_idx (a few per user beside the
-- facts: no index of their own for this).
SELECT user_id
FROM (
    (SELECT DISTINCT user_id
     FROM memory_fact
     WHERE superseded_at IS NULL AND (embedding_model <> $1 OR embedding_dim <> $2)
     ORDER BY user_id
     LIMIT $3)
    UNION
    (SELECT DISTINCT user_id
     FROM memory_note
     WHERE superseded_at IS NULL AND (embedding_model <> $1 OR embedding_dim <> $2)
     ORDER BY user_id
     LIMIT $3)
) AS left_over
ORDER BY user_id
LIMIT $3;

-- name: user_rows
-- One statement, one snapshot: the user's version and their active facts and
-- notes (`is_note`) still on another model or dimension. The move commits only
-- if the version is still this one, like a run's consolidation.
WITH state AS (
    SELECT coalesce((SELECT version FROM user_memory_state WHERE user_id = $3), 0) AS version
), rows_left AS (
    SELECT false AS is_note, f.id, f.text
    FROM memory_fact AS f
    WHERE f.user_id = $3 AND f.superseded_at IS NULL
      AND (f.embedding_model <> $1 OR f.embedding_dim <> $2)
    UNION ALL
    SELECT true, n.id, n.text
    FROM memory_note AS n
    WHERE n.user_id = $3 AND n.superseded_at IS NULL
      AND (n.embedding_model <> $1 OR n.embedding_dim <> $2)
)
SELECT state.version, r.is_note, r.id, r.text
FROM state
LEFT JOIN rows_left AS r ON true
ORDER BY r.is_note, r.id;

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

-- name: move_notes
-- The notes' new embeddings in place, as move_rows for facts. Notes take no
-- part in the user-version compare-and-set (a run's notes do not bump it): a
-- note that ended since the read (removed, promoted, said anew) is not moved,
-- and the caller, seeing the count short, rolls the user's move back and reads
-- them again. A note a commit added since is left for the next pass.
UPDATE memory_note AS n
SET embedding = m.embedding, embedding_model = $1
FROM unnest($4::bigint[], $5::halfvec[]) AS m (id, embedding)
WHERE n.user_id = $3 AND n.id = m.id AND n.superseded_at IS NULL
  AND vector_dims(m.embedding) = $2;

-- name: count_moved
UPDATE memory_reembed SET moved = moved + $3 WHERE model = $1 AND dim = $2;

-- name: verify
-- The end state: active facts and notes, and the rows of either on another model
-- or dimension, and those of another dimension alone.
WITH facts AS (
    SELECT count(*) AS active,
           count(*) FILTER (WHERE embedding_model <> $1 OR embedding_dim <> $2) AS other,
           count(*) FILTER (WHERE embedding_dim <> $2) AS other_dim
    FROM memory_fact
    WHERE superseded_at IS NULL
), notes AS (
    SELECT count(*) AS active,
           count(*) FILTER (WHERE embedding_model <> $1 OR embedding_dim <> $2) AS other,
           count(*) FILTER (WHERE embedding_dim <> $2) AS other_dim
    FROM memory_note
    WHERE superseded_at IS NULL
)
SELECT facts.active, notes.active AS active_notes,
       facts.other + notes.other AS other, facts.other_dim + notes.other_dim AS other_dim
FROM facts, notes;

-- name: finish
-- The fleet now embeds with $1 at $2: workers set up for the previous model
-- refuse to boot from here on (check_schema).
WITH done AS (
    UPDATE memory_reembed SET finished_at = now() WHERE model = $1 AND dim = $2
)
INSERT INTO memfleet_setting AS s (key, value)
VALUES ('embed_model', $1), ('embed_dim', $2::integer::text)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
