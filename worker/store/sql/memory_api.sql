-- Queries of the memory API (worker/api) and the read path (worker/read.py).
-- Every query is scoped to one user by its first parameter: a fact id of
-- another user behaves exactly like an id that does not exist.

-- name: user_version
SELECT coalesce((SELECT version FROM user_memory_state WHERE user_id = $1), 0);

-- name: bump_user_version
-- The same compare-and-set as the pipeline's persist transaction, so manual
-- writes and worker consolidation serialise per user: a job that read the
-- neighbours before this write re-runs consolidation. NULL: lost.
SELECT memfleet_bump_user_version($1, $2);

-- name: get_fact
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND id = $2;

-- name: active_embedding
-- What the user's active facts are embedded with, so a query about them is
-- embedded with the same (`memfleet reembed` moves users one at a time).
SELECT embedding_model, embedding_dim
FROM memory_fact
WHERE user_id = $1 AND superseded_at IS NULL
GROUP BY embedding_model, embedding_dim
ORDER BY count(*) DESC, embedding_model, embedding_dim
LIMIT 1;

-- name: insert_manual_fact
-- $16: how it was written (api | panel | tool | cli).
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_kind, scope, agent_id, valid_from, valid_to,
                         expires_at, pinned, basis, confidence, written_via)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'manual', $8, $9, coalesce($10::timestamptz, $7), $11, $12, $13, $14,
        $15, $16)
RETURNING {{fact_columns}};

-- name: remove_fact
-- Supersede without a successor: the row stays, the history is the data.
-- 'removed': the user said it is wrong, so its validity is left as it was.
UPDATE memory_fact
SET superseded_at = now(), superseded_reason = 'removed'
WHERE user_id = $1 AND id = $2 AND superseded_at IS NULL
RETURNING {{fact_columns}};

-- name: chain
-- Follow superseded_by forwards (newer versions) and backwards (older ones).
-- UNION (not UNION ALL) makes a corrupt cycle terminate instead of looping.
WITH RECURSIVE
forwards (id, superseded_by) AS (
    SELECT id, superseded_by FROM memory_fact WHERE user_id = $1 AND id = $2
    UNION
    SELECT f.id, f.superseded_by
    FROM memory_fact AS f JOIN forwards AS w ON f.id = w.superseded_by
    WHERE f.user_id = $1
),
backwards (id) AS (
    SELECT id FROM memory_fact WHERE user_id = $1 AND id = $2
    UNION
    SELECT f.id
    FROM memory_fact AS f JOIN backwards AS b ON f.superseded_by = b.id
    WHERE f.user_id = $1
)
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND id IN (SELECT id FROM forwards UNION SELECT id FROM backwards)
ORDER BY id;

-- name: search
-- The hybrid search of fact_rules.sql over the rows a read sees now: the top-$4
-- by meaning ($2, of dimension $5) and by words ($3), of the scope ($6) and agent
-- ($7) asked, behind the consent gate ($8), leaving out the ids of $9 (the prompt
-- split's volatile read: the facts its stable block holds already; empty: none).
WITH visible AS NOT MATERIALIZED (
    SELECT id, embedding, embedding_dim, text_search
    FROM memory_fact
    WHERE user_id = $1 AND {{visible($6, $7, $8)}} AND id <> ALL($9::bigint[])
),
{{hybrid_search($2, $3, $4, $5)}};

-- name: search_as_of
-- The same over the rows of an "as of" read (facts.sql facts_as_of): true at $8,
-- or believed at $9; the consent gate is $10.
WITH visible AS NOT MATERIALIZED (
    SELECT id, embedding, embedding_dim, text_search
    FROM memory_fact
    WHERE user_id = $1 AND {{visible_as_of($6, $7, $8, $9, $10)}}
),
{{hybrid_search($2, $3, $4, $5)}};

-- name: count_active
-- The rows of facts.sql active_facts, counted.
SELECT count(*) FROM memory_fact
WHERE user_id = $1 AND {{visible($2, $3, $4)}};

-- name: read_plan
-- What a prompt's read needs before it searches, in one round trip and one pass over
-- the user's active rows: the count of count_active ($2 scope, $3 agent, $4 consent
-- gate; its rule asks again that a row is not superseded, which the WHERE keeps) and the
-- model and dimension of active_embedding (NULL: no active fact); and how many facts
-- about the user's persons the read path's people section would find (persons.sql
-- person_facts: active, behind the gate), so a user with none costs no statement.
SELECT coalesce(sum(g.visible), 0)::bigint AS active,
       coalesce(sum(g.people), 0)::bigint AS people,
       (array_agg(g.embedding_model ORDER BY g.n DESC, g.embedding_model, g.embedding_dim))[1]
           AS embedding_model,
       (array_agg(g.embedding_dim ORDER BY g.n DESC, g.embedding_model, g.embedding_dim))[1]
           AS embedding_dim
FROM (
    SELECT embedding_model, embedding_dim, count(*) AS n,
           count(*) FILTER (WHERE {{visible($2, $3, $4)}}) AS visible,
           count(*) FILTER (WHERE person_id IS NOT NULL AND {{active}}
                            AND {{consent_gate($4)}}) AS people
    FROM memory_fact
    WHERE user_id = $1 AND superseded_at IS NULL
    GROUP BY embedding_model, embedding_dim
) AS g;

-- name: stable_plan
-- The prompt split's first read (worker/read_split.py), one round trip: read_plan's
-- count and model ($2 scope, $3 agent, $4 consent gate) on every row, and beside them
-- facts.sql stable_active_facts' first $5 facts (none: one row, its fact columns
-- NULL). The plan's model and dimension are renamed: the fact's own carry those names.
SELECT p.active, p.people, p.embedding_model AS plan_model, p.embedding_dim AS plan_dim,
       s.*
FROM (
    SELECT coalesce(sum(g.visible), 0)::bigint AS active,
           coalesce(sum(g.people), 0)::bigint AS people,
           (array_agg(g.embedding_model ORDER BY g.n DESC, g.embedding_model,
                      g.embedding_dim))[1] AS embedding_model,
           (array_agg(g.embedding_dim ORDER BY g.n DESC, g.embedding_model,
                      g.embedding_dim))[1] AS embedding_dim
    FROM (
        SELECT embedding_model, embedding_dim, count(*) AS n,
               count(*) FILTER (WHERE {{visible($2, $3, $4)}}) AS visible,
               count(*) FILTER (WHERE person_id IS NOT NULL AND {{active}}
                                AND {{consent_gate($4)}}) AS people
        FROM memory_fact
        WHERE user_id = $1 AND superseded_at IS NULL
        GROUP BY embedding_model, embedding_dim
    ) AS g
) AS p
LEFT JOIN LATERAL (
    SELECT {{fact_columns}}
    FROM memory_fact
    WHERE user_id = $1 AND {{visible($2, $3, $4)}}
    ORDER BY pinned DESC, importance DESC, id
    LIMIT $5
) AS s ON true
ORDER BY s.pinned DESC, s.importance DESC, s.id;

-- name: set_pinned
-- The user pins or unpins an active, unexpired fact; consolidation then holds
-- its changes to it for the user (memory_held_proposal).
UPDATE memory_fact
SET pinned = $3
WHERE user_id = $1 AND id = $2 AND {{active}}
RETURNING {{fact_columns}};

-- name: lock_user
-- The user's advisory lock, exclusive: an erase or a consent change waits for
-- the user's commits in flight and they wait for it (memfleet_commit_run).
SELECT pg_advisory_xact_lock(hashtextextended('memfleet:user:' || $1, 0));

-- name: lock_user_shared
-- lock_user, shared: a manual write that must see the user's consent as it commits
-- (PostgresStore.add_fact with a gate) waits for a consent change in flight.
SELECT pg_advisory_xact_lock_shared(hashtextextended('memfleet:user:' || $1, 0));

-- name: fence_key_check
-- The check value of the key the fleet's fences are written with, recorded by the
-- first caller ($1: its own): a caller whose value differs must not fence.
WITH recorded AS (
    INSERT INTO memory_erasure_fence_key (key_check) VALUES ($1)
    ON CONFLICT (only_row) DO NOTHING
    RETURNING key_check
)
SELECT key_check FROM recorded
UNION ALL
SELECT key_check FROM memory_erasure_fence_key
LIMIT 1;

-- name: fence_user
-- Runs of hand-overs numbered up to $2 write nothing from now on; fences older
-- than any hand-over's lifetime ($3 seconds) protect nothing and go. $1 is the
-- user's fence key (worker.store.fence_key: HMAC of the user id, never the id).
WITH pruned AS (
    DELETE FROM memory_erasure_fence
    WHERE erased_at < now() - make_interval(secs => $3)
)
INSERT INTO memory_erasure_fence AS f (user_key, erased_seq)
VALUES ($1::bytea, $2)
ON CONFLICT (user_key) DO UPDATE
    SET erased_seq = greatest(f.erased_seq, excluded.erased_seq), erased_at = now();

-- name: erase_held
-- Proposals kept for the user (memory_held_proposal) quote what they said; they
-- would go with their facts (ON DELETE CASCADE), but are counted first. Before the
-- persons too: a held addition names its person (schema/0020), with no cascade.
DELETE FROM memory_held_proposal WHERE user_id = $1;

-- name: erase_facts
-- One statement: superseded_by only points at rows of the same user, and the
-- foreign key (NO ACTION) is checked at the end of the statement, when every
-- referencing row is gone too.
DELETE FROM memory_fact WHERE user_id = $1;

-- name: erase_person_labels
-- The names of the people in the user's life (schema/0016_persons.sql), after
-- the facts about them.
DELETE FROM memory_person_label WHERE user_id = $1;

-- name: erase_persons
-- After the labels; merged_into only points at rows of the same user, checked at
-- the end of the statement.
DELETE FROM memory_person WHERE user_id = $1;

-- name: erase_runs
-- The user's audit rows. Never a row by its session id alone: session ids
-- repeat across users, and a row names a session only with its user
-- (schema/0008_run_owners.sql).
DELETE FROM memory_run WHERE user_id = $1;

-- name: erase_cursors
DELETE FROM session_cursor WHERE user_id = $1;

-- name: erase_state
DELETE FROM user_memory_state WHERE user_id = $1;

-- name: erase_consent
-- A user who turned memory off stays off ($2): forgetting must not turn it on.
DELETE FROM user_memory_consent WHERE user_id = $1 AND (enabled OR NOT $2);

-- name: erase_portraits
-- Every version of the user's portrait (schema/0018_portraits.sql).
DELETE FROM memory_portrait WHERE user_id = $1;

-- name: erase_portrait_choice
-- A user who removed their portrait stays without one ($2), as an opt-out stays.
DELETE FROM user_portrait_choice WHERE user_id = $1 AND (wanted OR NOT $2);

-- name: record_erasure
INSERT INTO memory_erasure (removed) VALUES ($1::jsonb);

-- name: set_consent
INSERT INTO user_memory_consent AS c (user_id, enabled) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET enabled = excluded.enabled, updated_at = now();

-- name: consent
SELECT enabled FROM user_memory_consent WHERE user_id = $1;
