-- The right of access (worker/ops/access_export.py, run by
-- worker/store/maintenance.py): everything memfleet holds about one
-- user, read in one REPEATABLE READ snapshot. Every query is scoped to the user
-- by its first parameter.

-- name: consent
SELECT enabled, updated_at FROM user_memory_consent WHERE user_id = $1;

-- name: facts
-- Every row, active and superseded: a fact's history is its chain of rows.
-- Not the embedding: it says nothing a person can read.
SELECT id, text, category, importance, observed_at, source_session_id, source_kind,
       superseded_at, superseded_by, run_id, embedding_model, created_at, scope, agent_id,
       valid_from, valid_to, expires_at, pinned, basis, confidence, superseded_reason,
       embedding_dim, written_via, person_id
FROM memory_fact
WHERE user_id = $1
ORDER BY id;

-- name: sessions
SELECT session_id, processed_count, user_turns_since_summary, summary, summary_updated_at,
       updated_at
FROM session_cursor
WHERE user_id = $1
ORDER BY session_id;

-- name: runs
-- The user's audit rows. Never a row by its session id alone: session ids
-- repeat across users (schema/0008_run_owners.sql).
SELECT id, session_id, outcome, error, slice_first_hash, slice_last_hash, slice_len,
       candidates, added, updated, deleted, unchanged, rejected, held, input_tokens,
       output_tokens, started_at, finished_at
FROM memory_run
WHERE user_id = $1
ORDER BY id;

-- name: held_proposals
-- Changes consolidation proposed and memfleet kept for the user instead of
-- applying (a pinned fact, or a more trusted one): the proposed text is theirs,
-- and so is their answer to it (accepted or dismissed, when, by whom); an
-- addition's person_id is whom it is about (NULL: the user; schema/0020).
SELECT id, fact_id, run_id, event, reason, text, session_id, proposed_at, resolution,
       resolved_at, resolved_by, result_fact_id, person_id
FROM memory_held_proposal
WHERE user_id = $1
ORDER BY id;

-- name: persons
-- The people in the user's life (docs/persons.md), merged ones too, each with
-- every version of its label (name, relation, aliases), oldest first: a rename
-- is history, like a fact's chain.
SELECT p.id, p.created_from, p.source_session_id, p.created_at, p.merged_into, p.merged_at,
       (SELECT jsonb_agg(jsonb_build_object(
                   'id', l.id, 'display_name', l.display_name, 'relation', l.relation,
                   'aliases', l.aliases, 'set_by', l.set_by, 'observed_at', l.observed_at,
                   'superseded_at', l.superseded_at, 'superseded_by', l.superseded_by)
                ORDER BY l.id)
        FROM memory_person_label AS l
        WHERE l.user_id = $1 AND l.person_id = p.id) AS labels
FROM memory_person AS p
WHERE p.user_id = $1
ORDER BY p.id;

-- name: portraits
-- Every version of the user's portrait (docs/portrait.md), and how each ended.
SELECT version, text, facts_hash, fact_count, model, prompt_version, created_at,
       superseded_at, removed_at, removed_reason
FROM memory_portrait
WHERE user_id = $1
ORDER BY version;
-- name: notes
-- The user's notes beside their facts (docs/notes.md), every version: what was
-- said, where, and what became of each (updated, removed, promoted to a fact).
-- Not the embedding.
SELECT id, text, observed_at, source_session_id, run_id, created_at, superseded_at,
       superseded_by, superseded_reason, promoted_to, embedding_model, embedding_dim
FROM memory_note
WHERE user_id = $1
ORDER BY id;
