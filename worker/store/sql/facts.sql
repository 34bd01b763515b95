-- Read queries over a user's facts (CLI and read path). Scoped by user_id ($1).

-- name: active_facts
SELECT id, user_id, text, category, importance, observed_at, source_session_id, source_kind,
       superseded_at, superseded_by, created_at, scope, agent_id, valid_from, valid_to,
       expires_at, pinned, basis, confidence, superseded_reason, embedding_model, embedding_dim
FROM memory_fact
WHERE user_id = $1 AND superseded_at IS NULL
ORDER BY observed_at, id;

-- name: all_facts
SELECT id, user_id, text, category, importance, observed_at, source_session_id, source_kind,
       superseded_at, superseded_by, created_at, scope, agent_id, valid_from, valid_to,
       expires_at, pinned, basis, confidence, superseded_reason, embedding_model, embedding_dim
FROM memory_fact
WHERE user_id = $1
ORDER BY id;

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
