-- Notes beside facts (docs/notes.md, schema/0017_notes.sql): the pipeline's
-- writes and check, the reads, the user's removal. Every statement is scoped to
-- one user by its first parameter; notes never mix with facts' statements.

-- name: note_neighbors
-- The nearest ACTIVE note of the same session ($2) for every new note's
-- embedding ($3), read once: a note said again in the session is not added
-- twice, a newer wording supersedes the older (worker/pipeline/notes.py). Only
-- notes of the same model ($4) and dimension are compared. Exact scan of the
-- user's active notes (memory_note_active_user_idx), as the facts' neighbours.
WITH active AS MATERIALIZED (
    SELECT n.id, n.embedding
    FROM memory_note AS n
    WHERE n.user_id = $1 AND n.superseded_at IS NULL AND n.source_session_id = $2
      AND n.embedding_model = $4 AND n.embedding_dim = $5
)
SELECT c.ord, t.id, n.text, t.distance
FROM unnest($3::halfvec[]) WITH ORDINALITY AS c (embedding, ord)
JOIN LATERAL (
    SELECT a.id, a.embedding <=> c.embedding AS distance
    FROM active AS a
    ORDER BY a.embedding <=> c.embedding, a.id
    LIMIT 1
) AS t ON true
JOIN memory_note AS n ON n.user_id = $1 AND n.id = t.id
ORDER BY c.ord;

-- name: insert_notes
-- A run's notes, inside its commit's transaction (worker/store/notes.py), after
-- memfleet_commit_run (its fences, consent check and the user's advisory lock
-- held to the end of the transaction; $4 is its audit row). Per note ($5 texts,
-- $6 embeddings, $7 models): the earlier active note of the same session it
-- replaces ($8, NULL for none) ends as 'updated' by it. A note that ended
-- meanwhile (removed, promoted) is left as it is: the new one is still added.
-- Identity values are drawn in ORDER BY order: sorted, they follow $5.
WITH inserted AS (
    INSERT INTO memory_note (user_id, text, embedding, embedding_model, observed_at,
                             source_session_id, run_id)
    SELECT $1, t.text, t.embedding, t.model, $2, $3, $4
    FROM unnest($5::text[], $6::halfvec[], $7::text[]) WITH ORDINALITY
         AS t (text, embedding, model, ord)
    ORDER BY t.ord
    RETURNING id
), numbered AS (
    SELECT id, row_number() OVER (ORDER BY id) AS ord FROM inserted
), superseded AS (
    UPDATE memory_note AS n
    SET superseded_at = $2, superseded_by = numbered.id, superseded_reason = 'updated'
    FROM unnest($8::bigint[]) WITH ORDINALITY AS s (target, ord)
    JOIN numbered ON numbered.ord = s.ord
    WHERE n.user_id = $1 AND n.id = s.target AND n.superseded_at IS NULL
    RETURNING n.id
)
SELECT (SELECT count(*) FROM inserted) AS added, (SELECT count(*) FROM superseded) AS updated;

-- name: active_notes
-- The user's active notes, oldest first, behind the consent gate ($2: NULL for
-- the user's own view, the fleet's default for a prompt's read).
SELECT {{note_columns}}
FROM memory_note
WHERE user_id = $1 AND superseded_at IS NULL AND {{consent_gate($2)}}
ORDER BY observed_at, id;

-- name: all_notes
-- Every version, by id: the user's own view of their notes' history.
SELECT {{note_columns}}
FROM memory_note
WHERE user_id = $1
ORDER BY id;

-- name: notes_of_fact
-- The notes a fact was promoted from (the link, read from the fact's side).
SELECT {{note_columns}}
FROM memory_note
WHERE user_id = $1 AND promoted_to = $2
ORDER BY id;

-- name: remove_note
-- The user removes a note: superseded, never deleted (an erase deletes).
UPDATE memory_note
SET superseded_at = now(), superseded_reason = 'removed'
WHERE user_id = $1 AND id = $2 AND superseded_at IS NULL
RETURNING {{note_columns}};

-- name: search_notes
-- The hybrid search of fact_rules.sql (ranked_lists) over the user's active
-- notes: the top-$4 by meaning ($2, of dimension $5) and by words ($3), behind
-- the consent gate ($6).
WITH visible AS NOT MATERIALIZED (
    SELECT id, embedding, embedding_dim, text_search
    FROM memory_note
    WHERE user_id = $1 AND superseded_at IS NULL AND {{consent_gate($6)}}
),
{{ranked_lists($2, $3, $4, $5)}}
SELECT {{note_columns}}, s.rank AS semantic_rank, l.rank AS lexical_rank
FROM memory_note AS n
LEFT JOIN semantic AS s ON s.fact_id = n.id
LEFT JOIN lexical AS l ON l.fact_id = n.id
WHERE n.user_id = $1 AND n.id IN (SELECT fact_id FROM semantic UNION SELECT fact_id FROM lexical);

-- name: erase_notes
-- Before the facts: a promoted note names its fact (memory_note_promoted_to_fkey).
DELETE FROM memory_note WHERE user_id = $1;

-- name: erase_note_check
-- Where the promotion job left the user (schema/0017): it names the user.
DELETE FROM memory_note_check WHERE user_id = $1;
