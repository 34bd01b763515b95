-- Read queries over a user's facts (CLI and read path). Scoped by user_id ($1).

-- Every read of facts takes the scope asked ($2: none | profile | relationship |
-- both | all) and the agent ($3): profile rows for profile and both, relationship
-- rows of that agent alone for relationship and both (none without an agent),
-- every row of the user for all.
-- worker/store/visibility.py says the same in Python.

-- Each also takes a consent gate (its last parameter, worker.store.types.ConsentGate):
-- NULL reads regardless of consent (the user's own view); true or false (the fleet's
-- default, for a user who never chose) finds no row while the user's memory is off,
-- read in the same statement, so a switch never meets a read half way.

-- name: active_facts
-- Expired rows are skipped before the expiry pass supersedes them.
SELECT id, user_id, text, category, importance, observed_at, source_session_id, source_kind,
       superseded_at, superseded_by, created_at, scope, agent_id, valid_from, valid_to,
       expires_at, pinned, basis, confidence, superseded_reason, embedding_model, embedding_dim
FROM memory_fact
WHERE user_id = $1 AND superseded_at IS NULL AND (expires_at IS NULL OR expires_at > now())
  AND ($2::text = 'all' OR (scope = 'profile' AND $2::text IN ('profile', 'both'))
       OR (scope = 'relationship' AND agent_id = $3::text
           AND $2::text IN ('relationship', 'both')))
  AND ($4::boolean IS NULL
       OR coalesce((SELECT c.enabled FROM user_memory_consent AS c WHERE c.user_id = $1), $4))
ORDER BY observed_at, id;

-- name: all_facts
SELECT id, user_id, text, category, importance, observed_at, source_session_id, source_kind,
       superseded_at, superseded_by, created_at, scope, agent_id, valid_from, valid_to,
       expires_at, pinned, basis, confidence, superseded_reason, embedding_model, embedding_dim
FROM memory_fact
WHERE user_id = $1
  AND ($2::text = 'all' OR (scope = 'profile' AND $2::text IN ('profile', 'both'))
       OR (scope = 'relationship' AND agent_id = $3::text
           AND $2::text IN ('relationship', 'both')))
  AND ($4::boolean IS NULL
       OR coalesce((SELECT c.enabled FROM user_memory_consent AS c WHERE c.user_id = $1), $4))
ORDER BY id;

-- name: facts_as_of
-- The two "as of" reads of docs/memory_model.md, one time given ($4 or $5).
-- valid_at ($4): true then by what memfleet knows now. An expiry ends the
-- validity where the expiry pass will, so the answer does not wait for it; a
-- removed row was never true.
-- known_at ($5): believed then: observed by then, not yet superseded, and not
-- expired (a read then skipped it, whenever the expiry pass ran).
SELECT id, user_id, text, category, importance, observed_at, source_session_id, source_kind,
       superseded_at, superseded_by, created_at, scope, agent_id, valid_from, valid_to,
       expires_at, pinned, basis, confidence, superseded_reason, embedding_model, embedding_dim
FROM memory_fact
WHERE user_id = $1
  AND ($2::text = 'all' OR (scope = 'profile' AND $2::text IN ('profile', 'both'))
       OR (scope = 'relationship' AND agent_id = $3::text
           AND $2::text IN ('relationship', 'both')))
  AND ($4::timestamptz IS NULL
       OR (valid_from <= $4 AND coalesce(valid_to, expires_at, 'infinity') > $4
           AND superseded_reason IS DISTINCT FROM 'removed'))
  AND ($5::timestamptz IS NULL
       OR (observed_at <= $5 AND coalesce(superseded_at, 'infinity') > $5
           AND coalesce(expires_at, 'infinity') > $5))
  AND ($6::boolean IS NULL
       OR coalesce((SELECT c.enabled FROM user_memory_consent AS c WHERE c.user_id = $1), $6))
ORDER BY observed_at, id;

-- name: runs_for_session
SELECT id, job_id, job_try, session_id, user_id, outcome, error, slice_first_hash,
       slice_last_hash, slice_len, candidates, added, updated, deleted, unchanged, rejected,
       consolidation_attempts, input_tokens, output_tokens, timings_ms, started_at, finished_at
FROM memory_run
WHERE user_id = $1 AND session_id = $2
ORDER BY id;

-- name: runs_for_user
SELECT id, job_id, job_try, session_id, user_id, outcome, error, slice_len, candidates,
       added, updated, deleted, unchanged, rejected, started_at, finished_at
FROM memory_run
WHERE user_id = $1
ORDER BY id;

-- name: runs_by_outcome
-- Dead letters for operators (`memfleet runs`): the newest runs that ended so.
SELECT id, job_id, job_try, session_id, user_id, outcome, error, slice_len, started_at,
       finished_at
FROM memory_run
WHERE outcome = ANY($1::text[])
ORDER BY id DESC
LIMIT $2;

-- name: failed_sessions
-- Sessions whose latest run failed for good (`memfleet retry --failed`).
SELECT user_id, session_id
FROM (
    SELECT DISTINCT ON (user_id, session_id) user_id, session_id, outcome
    FROM memory_run
    WHERE session_id IS NOT NULL AND user_id IS NOT NULL
    ORDER BY user_id, session_id, id DESC
) AS latest
WHERE outcome = 'failed'
ORDER BY user_id, session_id;
