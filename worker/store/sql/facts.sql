-- Read queries over a user's facts (CLI and read path). Scoped by user_id ($1).

-- The reads of facts are written with the rules of fact_rules.sql: the columns
-- of a fact, the scope ($2) and agent ($3) asked, the consent gate (the last of
-- the three, $4, or $6 for facts_as_of); worker/store/visibility.py says the
-- same in Python.

-- name: active_facts
-- Expired rows are skipped before the expiry pass supersedes them.
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND {{visible($2, $3, $4)}}
ORDER BY observed_at, id;

-- name: newest_active_facts
-- The newest $5 of active_facts, newest first (the caller reverses them): a prompt's
-- read without a question keeps only those, so the others are never fetched.
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND {{visible($2, $3, $4)}}
ORDER BY observed_at DESC, id DESC
LIMIT $5;

-- name: stable_active_facts
-- The first $5 of active_facts in the prompt's stable order (worker/read_split.py,
-- docs/prompt.md): pinned first, then the most important, then the oldest id. Only
-- the facts' own columns decide it, never a query or the clock, so the same rows
-- come back until a commit changes one of them.
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND {{visible($2, $3, $4)}}
ORDER BY pinned DESC, importance DESC, id
LIMIT $5;

-- name: all_facts
-- Superseded and expired rows too: a fact's history.
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND {{in_scope($2, $3)}} AND {{consent_gate($4)}}
ORDER BY id;

-- name: facts_as_of
-- The two "as of" reads of docs/memory_model.md, one time given: valid_at ($4)
-- or known_at ($5).
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND {{visible_as_of($2, $3, $4, $5, $6)}}
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

-- name: dead_letters
-- Dead letters for operators (`memfleet runs`, `memfleet retry`): one per point where
-- a session's memory stopped, not one per run. A point is the session's cursor as its
-- runs left it: a run that moved the cursor (memfleet_commit_run writes its row with
-- the move) ends the point it started from, so the runs between two moves all tried
-- the same slice (ARQ's tries, a job queued again, a re-drive, a later hand-over). A
-- dead letter is resolved by the first move at or after its first run (a skipped
-- slice by its own run). A run that names no session is a dead letter of its own,
-- which nothing resolves.
--   $1 dead-letter outcomes, $2 outcomes of cursor moves, $3 outcomes of attempts
--   (worker.outcomes); $4 the outcomes asked for (of a dead letter's latest run);
--   $5 resolved ones and those without a session too; $6 at most (NULL: all);
--   $7, $8 one user's session alone (NULL: every session)
WITH touched AS (
    SELECT DISTINCT user_id, session_id
    FROM memory_run
    WHERE outcome = ANY($1::text[]) AND session_id IS NOT NULL
      AND ($7::text IS NULL OR (user_id = $7 AND session_id = $8::text))
),
placed AS (
    SELECT r.id, r.user_id, r.session_id, r.outcome, r.finished_at,
           -- the cursor moves before this run: which point it tried
           count(*) FILTER (WHERE r.outcome = ANY($2::text[])) OVER (
               PARTITION BY r.user_id, r.session_id ORDER BY r.id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS point
    FROM touched AS t
    JOIN memory_run AS r ON r.user_id = t.user_id AND r.session_id = t.session_id
),
letters AS (
    SELECT user_id, session_id,
           min(id) FILTER (WHERE outcome = ANY($1::text[])) AS first_id,
           max(id) FILTER (WHERE outcome = ANY($1::text[])) AS last_id,
           count(*) FILTER (WHERE outcome = ANY($3::text[])) AS attempts,
           min(finished_at) FILTER (WHERE outcome = ANY($3::text[])) AS first_failed_at
    FROM placed
    GROUP BY user_id, session_id, point
    HAVING bool_or(outcome = ANY($1::text[]))
    UNION ALL
    SELECT NULL, NULL, id, id, 1, finished_at
    FROM memory_run
    WHERE outcome = ANY($1::text[]) AND session_id IS NULL AND $7::text IS NULL
)
SELECT l.user_id, l.session_id, last.outcome, last.error, last.job_id, last.job_try,
       l.attempts, l.first_failed_at, last.finished_at AS last_failed_at,
       moved.outcome AS resolved_by, moved.finished_at AS resolved_at
FROM letters AS l
JOIN memory_run AS last ON last.id = l.last_id
LEFT JOIN LATERAL (
    SELECT m.outcome, m.finished_at
    FROM memory_run AS m
    WHERE m.user_id = l.user_id AND m.session_id = l.session_id
      AND m.id >= l.first_id AND m.outcome = ANY($2::text[])
    ORDER BY m.id
    LIMIT 1
) AS moved ON true
WHERE last.outcome = ANY($4::text[])
  AND ($5 OR (moved.outcome IS NULL AND l.session_id IS NOT NULL))
ORDER BY l.last_id DESC
LIMIT $6;
