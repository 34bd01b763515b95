-- Audit rows without a user (memory_run.user_id NULL, session_id set) were
-- written by releases before user-scoped sessions (0006), for runs that failed
-- before reading their user. The export and the erase used to match them by
-- session id alone; session ids repeat across users, so one such row showed in
-- two users' exports and went with either's erase. From now on nothing is
-- matched by session id alone: each such row gets the one user it belongs to
-- without doubt, or belongs to nobody.
--
-- Without doubt: exactly one user is tied to the session id anywhere in the
-- database (audit rows with a user, cursors, facts by their source session,
-- held proposals), and that user ran the session before this row was written
-- (one of their audit rows of it finished earlier). A failure before a
-- session's first recorded run, or a session id two users share, is not
-- attributed: the row keeps its counts and times but no session id, so no
-- user's export shows it and no erase is owed it.
-- The current release writes no such row: a run that does not know its user
-- does not know its session either (worker.job).

WITH ties (session_id, user_id) AS (
    SELECT session_id, user_id FROM memory_run
    WHERE user_id IS NOT NULL AND session_id IS NOT NULL
    UNION
    SELECT session_id, user_id FROM session_cursor
    UNION
    SELECT source_session_id, user_id FROM memory_fact WHERE source_session_id IS NOT NULL
    UNION
    SELECT session_id, user_id FROM memory_held_proposal WHERE session_id IS NOT NULL
),
sole (session_id, user_id) AS (
    SELECT session_id, min(user_id) FROM ties GROUP BY session_id
    HAVING count(DISTINCT user_id) = 1
)
UPDATE memory_run AS r
SET user_id = s.user_id
FROM sole AS s
WHERE r.user_id IS NULL AND r.session_id = s.session_id
  AND EXISTS (SELECT 1 FROM memory_run AS earlier
              WHERE earlier.session_id = r.session_id AND earlier.user_id = s.user_id
                AND earlier.finished_at <= r.finished_at);

UPDATE memory_run SET session_id = NULL WHERE user_id IS NULL AND session_id IS NOT NULL;

-- And no new one: a row names a session only with its user.
ALTER TABLE memory_run ADD CONSTRAINT memory_run_owner_check
    CHECK (user_id IS NOT NULL OR session_id IS NULL);
