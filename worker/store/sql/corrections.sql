-- The user's corrections through the memory API (worker/store/corrections.py):
-- a fact edited, and the changes consolidation held back (memory_held_proposal)
-- accepted or dismissed. Every statement is scoped to one user by $1: another
-- user's fact or proposal reads exactly like one that does not exist.

-- name: held_proposals
-- $2: open (no answer yet) | resolved | all. stale: an open proposal whose fact
-- is no longer the active, unexpired version it was held against; it can only
-- be dismissed. An addition (event ADD: a candidate consolidation could not
-- decide about) was held against no fact, so it is never stale; person_id is
-- whom its fact is about (NULL: the user; schema/0020).
SELECT p.id, p.fact_id, p.run_id, p.event, p.reason, p.text, p.session_id, p.proposed_at,
       p.resolution, p.resolved_at, p.resolved_by, p.result_fact_id,
       p.category, p.importance, p.scope, p.agent_id, p.person_id,
       (p.resolution IS NULL AND p.fact_id IS NOT NULL AND f.id IS NULL) AS stale
FROM memory_held_proposal AS p
LEFT JOIN memory_fact AS f
       ON f.user_id = $1 AND f.id = p.fact_id AND {{active}}
WHERE p.user_id = $1
  AND ($2::text = 'all' OR (p.resolution IS NULL) = ($2::text = 'open'))
ORDER BY p.id;

-- name: held_proposal
SELECT p.id, p.fact_id, p.run_id, p.event, p.reason, p.text, p.session_id, p.proposed_at,
       p.resolution, p.resolved_at, p.resolved_by, p.result_fact_id,
       p.category, p.importance, p.scope, p.agent_id, p.person_id,
       (p.resolution IS NULL AND p.fact_id IS NOT NULL AND f.id IS NULL) AS stale
FROM memory_held_proposal AS p
LEFT JOIN memory_fact AS f
       ON f.user_id = $1 AND f.id = p.fact_id AND {{active}}
WHERE p.user_id = $1 AND p.id = $2;

-- name: lock_proposal
-- Taken first by an accept and by a dismiss: two answers to one proposal queue
-- here, and the second finds it answered.
SELECT id, fact_id, event, text, session_id, proposed_at, resolution, category, importance,
       scope, agent_id, person_id
FROM memory_held_proposal
WHERE user_id = $1 AND id = $2
FOR UPDATE;

-- name: lock_active_fact
-- The version a correction replaces, if it is still the active, unexpired one.
-- The user-version compare-and-set already serialises the user's writers; the
-- lock keeps the expiry pass, which takes no version, from ending it meanwhile.
SELECT id, category, importance, scope, agent_id, pinned, person_id
FROM memory_fact
WHERE user_id = $1 AND id = $2 AND {{active}}
FOR UPDATE;

-- name: insert_version
-- The next version of a fact: its scope ($10), agent ($11) and pin ($15) are
-- the old version's. $9: manual (an edit) or extracted (a proposal accepted, from
-- the session $8 that said it). $17: how an edit was written (api | panel | tool |
-- cli); NULL for an accepted proposal. $18: the person the old version is about
-- (NULL: the user; docs/persons.md), kept.
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_session_id, source_kind, scope, agent_id,
                         valid_from, valid_to, expires_at, pinned, basis, confidence,
                         written_via, person_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 'stated', $16,
        $17, $18)
RETURNING {{fact_columns}};

-- name: insert_addition
-- An accepted addition (a candidate held as undecided): a new fact of its own,
-- not a version of another, stated by the user in session $8 and confirmed by
-- them, valid from when it was said ($7), about the person it was held for ($12;
-- NULL: the user). A merge moves open proposals with the facts (persons.sql
-- move_held); a merge by the previous release's API did not, so the person is
-- followed along merged_into here too (at most 16 steps, as memfleet_commit_persons).
WITH RECURSIVE chain (id, merged_into, depth) AS (
    SELECT id, merged_into, 0 FROM memory_person WHERE user_id = $1 AND id = $12
    UNION ALL
    SELECT p.id, p.merged_into, c.depth + 1
    FROM chain AS c
    JOIN memory_person AS p ON p.user_id = $1 AND p.id = c.merged_into
    WHERE c.depth < 16
)
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_session_id, source_kind, scope, agent_id,
                         valid_from, basis, confidence, person_id)
VALUES ($1, $2, $3, $4, $5, $6, now(), $8, 'extracted', $9, $10, $7, 'stated', $11,
        (SELECT id FROM chain ORDER BY depth DESC LIMIT 1))
RETURNING {{fact_columns}};

-- name: supersede_version
-- The old version ($2) ends where its successor ($3) begins, even when it gave
-- an end of its own later than that: a version's validity never overlaps its
-- successor's. A successor valid from the old one's start (an edit that names
-- no valid_from: a correction) leaves it valid for no time at all: it was never
-- true.
UPDATE memory_fact AS f
SET superseded_at = n.observed_at, superseded_by = n.id, superseded_reason = 'updated',
    valid_to = least(f.valid_to, greatest(f.valid_from, n.valid_from))
FROM memory_fact AS n
WHERE f.user_id = $1 AND f.id = $2 AND f.superseded_at IS NULL
  AND n.user_id = $1 AND n.id = $3
RETURNING f.id;

-- name: end_version
-- An accepted DELETE: the fact stopped holding when the conversation said so
-- ($3, when the change was proposed), as a worker's DELETE ends it.
UPDATE memory_fact
SET superseded_at = now(), superseded_reason = 'deleted',
    valid_to = least(valid_to, greatest(valid_from, $3::timestamptz))
WHERE user_id = $1 AND id = $2 AND superseded_at IS NULL
RETURNING {{fact_columns}};

-- name: resolve_proposal
-- The answer, once: an answered proposal is never answered again.
UPDATE memory_held_proposal
SET resolution = $3, resolved_at = now(), resolved_by = $4, result_fact_id = $5
WHERE user_id = $1 AND id = $2 AND resolution IS NULL
RETURNING id;
