-- The notes' promotion job (worker/ops/note_promotion.py, run by
-- worker/store/note_promotion.py; docs/notes.md): recurring notes of a user
-- become a fact. One pass at a time in the fleet (the advisory lock below);
-- each promotion is one transaction under the user's advisory lock, shared as a
-- commit takes it, that writes only if every note of its cluster is still
-- active: a second pass, the user's removal or an erase in between, and it
-- writes nothing. Every statement but users_to_check names one user ($1).

-- name: try_lock
-- Held on a connection of its own for the whole pass: a second pass anywhere in
-- the fleet skips its turn. A killed process's connection closes, and the lock
-- goes with it.
SELECT pg_try_advisory_lock(hashtextextended('memfleet:notes-promotion', 0));

-- name: unlock
SELECT pg_advisory_unlock(hashtextextended('memfleet:notes-promotion', 0));

-- name: users_to_check
-- Up to $3 users, in user order, whose active notes come from at least $1
-- sessions and who have an active note newer than the one the job last looked
-- at (memory_note_check), memory on (their choice, else the fleet's default
-- $2). Spans users on purpose: the job's one look across them, through the
-- partial index of active notes.
SELECT n.user_id, max(n.id) AS newest
FROM memory_note AS n
WHERE n.superseded_at IS NULL
GROUP BY n.user_id
HAVING max(n.id) > coalesce((SELECT c.newest_note FROM memory_note_check AS c
                             WHERE c.user_id = n.user_id), 0)
   AND count(DISTINCT coalesce(n.source_session_id, '')) >= $1
   AND coalesce((SELECT e.enabled FROM user_memory_consent AS e WHERE e.user_id = n.user_id),
                $2)
ORDER BY n.user_id
LIMIT $3;

-- name: user_notes
-- The user's newest $4 active notes embedded by model $2 at dimension $3.
SELECT id, text, source_session_id, observed_at, embedding
FROM memory_note
WHERE user_id = $1 AND superseded_at IS NULL AND embedding_model = $2 AND embedding_dim = $3
ORDER BY id DESC
LIMIT $4;

-- name: nearest_facts
-- For each proposed fact's embedding ($2), the user's nearest active profile
-- fact of the same model ($3) and dimension ($4), with its distance: a fact that
-- says it already takes the notes instead of a new one.
WITH active AS MATERIALIZED (
    SELECT id, embedding
    FROM memory_fact
    WHERE user_id = $1 AND {{active}} AND agent_id IS NULL
      AND embedding_model = $3 AND embedding_dim = $4
)
SELECT c.ord, t.id, t.distance
FROM unnest($2::halfvec[]) WITH ORDINALITY AS c (embedding, ord)
JOIN LATERAL (
    SELECT a.id, a.embedding <=> c.embedding AS distance
    FROM active AS a
    ORDER BY a.embedding <=> c.embedding, a.id
    LIMIT 1
) AS t ON true
ORDER BY c.ord;

-- name: lock_user
-- Shared, as a commit takes it: an erase (exclusive) never lands half way.
SELECT pg_advisory_xact_lock_shared(hashtextextended('memfleet:user:' || $1, 0));

-- name: memory_on
-- The user's memory now: their choice, else the fleet's default ($2).
SELECT coalesce((SELECT enabled FROM user_memory_consent WHERE user_id = $1), $2);

-- name: bump_user_version
-- Before the notes (the order a commit takes the rows in): a consolidation that
-- read the user's facts before the promoted one reads again.
INSERT INTO user_memory_state AS s (user_id, version) VALUES ($1, 1)
ON CONFLICT (user_id) DO UPDATE SET version = s.version + 1, updated_at = now()
RETURNING version;

-- name: lock_notes
-- The cluster's notes ($2) still active, locked until the promotion commits: a
-- second pass waits here, then finds them promoted.
SELECT id
FROM memory_note
WHERE user_id = $1 AND id = ANY($2::bigint[]) AND superseded_at IS NULL
ORDER BY id
FOR UPDATE;

-- name: fact_active
-- The fact that covers the notes ($2) is still active.
SELECT id FROM memory_fact WHERE user_id = $1 AND id = $2 AND {{active}} FOR SHARE;

-- name: insert_fact
-- The promoted fact: extracted from what the user said, inferred from several
-- notes ($9: confidence_for('extracted', 'inferred')), a profile fact valid from
-- the newest note, observed then, in the newest note's session.
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_session_id, source_kind, valid_from, basis,
                         confidence)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'extracted', $7, 'inferred', $9)
RETURNING id;

-- name: mark_promoted
-- The link: each note names the fact it became part of.
UPDATE memory_note
SET superseded_at = now(), superseded_reason = 'promoted', promoted_to = $2
WHERE user_id = $1 AND id = ANY($3::bigint[]) AND superseded_at IS NULL;

-- name: mark_checked
-- Where the job left the user ($2: the newest active note it looked at); written
-- only while the user has notes, so nothing of an erased user is made again.
INSERT INTO memory_note_check AS c (user_id, newest_note)
SELECT $1, $2
WHERE EXISTS (SELECT 1 FROM memory_note WHERE user_id = $1)
ON CONFLICT (user_id) DO UPDATE
    SET newest_note = greatest(c.newest_note, excluded.newest_note), checked_at = now();
