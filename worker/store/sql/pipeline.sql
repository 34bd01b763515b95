-- Queries of the job pipeline. Each block starts with `-- name: NAME`;
-- worker/store/queries.py loads them by name. Every query on facts is scoped
-- to one user by its first parameter.

-- name: load_session
-- The session's cursor (columns NULL when it has none) and the user's consent
-- (NULL: the fleet's default), in one round trip.
SELECT c.session_id, c.user_id, c.version, c.last_hash, c.window_hash, c.position,
       c.processed_count, c.user_turns_since_summary, c.summary, c.handover_seq,
       (SELECT enabled FROM user_memory_consent WHERE user_id = $1) AS memory_enabled
FROM (SELECT 1) AS one
LEFT JOIN session_cursor AS c ON c.user_id = $1 AND c.session_id = $2;

-- name: neighbors
-- One statement, so one snapshot: the user's version and the top-k ACTIVE
-- facts of that user for every candidate embedding. Exact scan, no ANN index
-- (docs/architecture.md, "Storage"). The user's active rows are read once
-- (through the partial index) into a materialised set that every candidate
-- ranks, rather than the heap once per candidate (measured in docs/bench.md).
-- Text and date are fetched for the top k only.
-- A candidate ($4, per candidate: its agent, NULL for a profile fact) is only
-- compared with facts it may supersede: the same scope and agent, and about the
-- same person ($7, per candidate: NULL for the user; docs/persons.md). Expired rows
-- are not neighbours even before the expiry pass supersedes them. Distances are
-- only taken against rows embedded by the same model ($5; NULL: any) and
-- dimension ($6);
-- other_model names the one the user's facts are on when it is another.
WITH state AS (
    SELECT coalesce((SELECT version FROM user_memory_state WHERE user_id = $1), 0) AS version
), active AS MATERIALIZED (
    SELECT f.id, f.embedding, f.agent_id, f.person_id, f.embedding_model, f.embedding_dim
    FROM memory_fact AS f
    WHERE f.user_id = $1 AND {{active}}
), other AS (
    SELECT a.embedding_model, a.embedding_dim
    FROM active AS a
    WHERE ($5::text IS NOT NULL AND a.embedding_model <> $5) OR a.embedding_dim <> $6
    LIMIT 1
), top AS (
    SELECT c.ord, n.id, n.distance
    FROM unnest($2::halfvec[], $4::text[], $7::bigint[])
         WITH ORDINALITY AS c (embedding, agent, person, ord)
    LEFT JOIN LATERAL (
        SELECT a.id, a.embedding <=> c.embedding AS distance
        FROM active AS a
        WHERE a.agent_id IS NOT DISTINCT FROM c.agent
          AND a.person_id IS NOT DISTINCT FROM c.person
          AND ($5::text IS NULL OR a.embedding_model = $5) AND a.embedding_dim = $6
        ORDER BY a.embedding <=> c.embedding, a.id
        LIMIT $3
    ) AS n ON true
)
SELECT state.version, other.embedding_model AS other_model, other.embedding_dim AS other_dim,
       top.ord, top.id, f.text, f.observed_at, f.pinned, f.confidence, top.distance
FROM state
CROSS JOIN top
LEFT JOIN other ON true
LEFT JOIN memory_fact AS f ON f.id = top.id AND f.user_id = $1
ORDER BY top.ord, top.distance, top.id;

-- name: commit_run
-- The whole persist transaction in one round trip (schema/routines/memfleet_commit_run.sql).
SELECT memfleet_commit_run($1::jsonb, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
                           $14, $15, $16, $17, $18, $19, $20, $21::jsonb, $22::jsonb);

-- name: insert_run
-- An audit row on its own (runs that move no cursor), from the same JSON the
-- persist function reads.
SELECT memfleet_insert_run($1::jsonb);

-- name: ping
-- The workers' health check (/healthz): the server answers.
SELECT 1;
