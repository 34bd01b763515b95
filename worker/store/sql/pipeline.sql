-- Queries of the job pipeline. Each block starts with `-- name: NAME`;
-- worker/store/queries.py loads them by name. Every query on facts is scoped
-- to one user by its first parameter.

-- name: load_cursor
SELECT session_id, user_id, version, last_hash, window_hash, position,
       processed_count, user_turns_since_summary, summary
FROM session_cursor
WHERE session_id = $1;

-- name: neighbors
-- One statement, so one snapshot: the user's version and the top-k ACTIVE
-- facts of that user for every candidate embedding. Exact scan through the
-- partial index on active rows; no ANN index (see design.md).
WITH state AS (
    SELECT coalesce((SELECT version FROM user_memory_state WHERE user_id = $1), 0) AS version
)
SELECT state.version, c.ord, n.id, n.text, n.observed_at, n.distance
FROM state
CROSS JOIN unnest($2::halfvec[]) WITH ORDINALITY AS c (embedding, ord)
LEFT JOIN LATERAL (
    SELECT f.id, f.text, f.observed_at, f.embedding <=> c.embedding AS distance
    FROM memory_fact AS f
    WHERE f.user_id = $1 AND f.superseded_at IS NULL
    ORDER BY f.embedding <=> c.embedding, f.id
    LIMIT $3
) AS n ON true
ORDER BY c.ord, n.distance, n.id;

-- name: insert_cursor
-- First run of a session: the fence is the primary key.
INSERT INTO session_cursor (session_id, user_id, version, last_hash, window_hash, position,
                            processed_count, user_turns_since_summary)
VALUES ($1, $2, 1, $3, $4, $5, $6, $7)
ON CONFLICT (session_id) DO NOTHING
RETURNING version;

-- name: advance_cursor
-- Compare-and-set: only the run that read version $2 may advance it.
UPDATE session_cursor
SET version = version + 1, last_hash = $3, window_hash = $4, position = $5,
    processed_count = processed_count + $6,
    user_turns_since_summary = user_turns_since_summary + $7,
    updated_at = now()
WHERE session_id = $1 AND version = $2 AND user_id = $8
RETURNING version;

-- name: bump_user_version
-- Compare-and-set on the user's version read with the neighbours ($2).
INSERT INTO user_memory_state AS s (user_id, version) VALUES ($1, $2 + 1)
ON CONFLICT (user_id) DO UPDATE SET version = s.version + 1, updated_at = now()
    WHERE s.version = $2
RETURNING version;

-- name: insert_facts
-- All of a run's new facts in one statement. Identity values are drawn in the
-- ORDER BY order, so the returned ids, sorted, follow the input order.
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_session_id, source_kind, run_id)
SELECT $1, t.text, t.category, t.importance, t.embedding, $6, $7, $8, 'extracted', $9
FROM unnest($2::text[], $3::text[], $4::smallint[], $5::halfvec[])
     WITH ORDINALITY AS t (text, category, importance, embedding, ord)
ORDER BY t.ord
RETURNING id;

-- name: supersede_facts
-- All of a run's supersessions in one statement; only ACTIVE rows of this user.
UPDATE memory_fact AS f
SET superseded_at = $4, superseded_by = s.by
FROM unnest($2::bigint[], $3::bigint[]) AS s (id, by)
WHERE f.id = s.id AND f.user_id = $1 AND f.superseded_at IS NULL
RETURNING f.id;

-- name: insert_run
INSERT INTO memory_run (job_id, job_try, session_id, user_id, outcome, error,
                        slice_first_hash, slice_last_hash, slice_len, candidates,
                        added, updated, deleted, unchanged, rejected,
                        consolidation_attempts, input_tokens, output_tokens,
                        timings_ms, started_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
        $19::jsonb, $20)
RETURNING id;

-- name: save_summary
UPDATE session_cursor
SET summary = $2, summary_updated_at = now(), user_turns_since_summary = 0
WHERE session_id = $1;
