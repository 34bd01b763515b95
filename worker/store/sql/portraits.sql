-- The user's portrait (schema/0018_portraits.sql, worker/store/portraits.py,
-- docs/portrait.md). Every statement is scoped to one user by its first
-- parameter. The facts a portrait is made from are the user's profile facts a
-- prompt's read sees (the fragment visible, with scope 'profile' and no agent:
-- another agent's relationship facts never reach a portrait every agent reads),
-- the first $limit in the stable order of facts.sql stable_active_facts.

-- name: portrait_facts
-- What a portrait is made from: $2 'profile', $3 NULL (no agent), $4 the consent
-- gate (nothing while the user's memory is off), $5 the most facts given.
SELECT id, text, category
FROM memory_fact
WHERE user_id = $1 AND {{visible($2, $3, $4)}}
ORDER BY pinned DESC, importance DESC, id
LIMIT $5;

-- name: portrait_state
-- The user's current portrait's version and what it was built from (NULL: none),
-- the latest version of any state (0: never one), whether the user wants one, and
-- whether their memory is on ($2: the fleet's default for a user who never chose).
SELECT {{consent_gate($2)}} AS memory_on,
       (SELECT version FROM memory_portrait
        WHERE user_id = $1 AND superseded_at IS NULL AND removed_at IS NULL) AS current,
       (SELECT facts_hash FROM memory_portrait
        WHERE user_id = $1 AND superseded_at IS NULL AND removed_at IS NULL) AS facts_hash,
       coalesce((SELECT max(version) FROM memory_portrait WHERE user_id = $1), 0) AS latest,
       coalesce((SELECT wanted FROM user_portrait_choice WHERE user_id = $1), true) AS wanted;

-- name: lock_user_shared
-- The user's advisory lock, shared: as memfleet_commit_run takes it. An erase or a
-- consent change (memory_api.sql lock_user, exclusive) waits for a portrait being
-- written, and a portrait waits for them.
SELECT pg_advisory_xact_lock_shared(hashtextextended('memfleet:user:' || $1, 0));

-- name: lock_portrait
-- One portrait write of the user at a time (two jobs of one user racing to write
-- the next version).
SELECT pg_advisory_xact_lock(hashtextextended('memfleet:portrait:' || $1, 0));

-- name: portrait_still_due
-- Under both locks: whether a portrait built from the facts $2 (their ids, sorted)
-- may be written now. The user's memory is on ($3: the consent gate), the user has
-- not removed their portrait without asking for one again, and the facts a
-- portrait would be made from now are exactly $2 ($4 'profile', $5 NULL, $6 the
-- most facts). Fact ids are never given twice, so facts read before an erase can
-- never match after it: a portrait from them is never written (the erase's fence
-- for portraits; docs/portrait.md).
SELECT {{consent_gate($3)}}
       AND coalesce((SELECT wanted FROM user_portrait_choice WHERE user_id = $1), true)
       AND coalesce((SELECT array_agg(id ORDER BY id) FROM (
               SELECT id FROM memory_fact
               WHERE user_id = $1 AND {{visible($4, $5, $3)}}
               ORDER BY pinned DESC, importance DESC, id
               LIMIT $6) AS made_from), '{}'::bigint[]) = $2::bigint[];

-- name: supersede_portrait
-- The current version gives way to the next.
UPDATE memory_portrait SET superseded_at = now()
WHERE user_id = $1 AND superseded_at IS NULL AND removed_at IS NULL;

-- name: insert_portrait
-- The next version: $2 text, $3 facts_hash, $4 fact_count, $5 model, $6 prompt_version.
INSERT INTO memory_portrait (user_id, version, text, facts_hash, fact_count, model,
                             prompt_version)
VALUES ($1, coalesce((SELECT max(version) FROM memory_portrait WHERE user_id = $1), 0) + 1,
        $2, $3, $4, $5, $6)
RETURNING user_id, version, text, facts_hash, fact_count, model, prompt_version, created_at;

-- name: remove_portrait
-- The current version ends without a successor: removed by the user ('user'), memory
-- switched off ('memory_off'), or no fact left to make one from ('no_facts').
UPDATE memory_portrait SET removed_at = now(), removed_reason = $2
WHERE user_id = $1 AND superseded_at IS NULL AND removed_at IS NULL
RETURNING version;

-- name: current_portrait
-- The current version, behind the consent gate ($2: NULL reads regardless, the
-- user's own view; a default: none while the user's memory is off).
SELECT user_id, version, text, facts_hash, fact_count, model, prompt_version, created_at
FROM memory_portrait
WHERE user_id = $1 AND superseded_at IS NULL AND removed_at IS NULL
  AND {{consent_gate($2)}};

-- name: set_portrait_wanted
INSERT INTO user_portrait_choice AS c (user_id, wanted) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET wanted = excluded.wanted, updated_at = now();

-- name: portrait_versions
-- Every version, newest first: the user's own view of what was written.
SELECT user_id, version, text, facts_hash, fact_count, model, prompt_version, created_at,
       superseded_at, removed_at, removed_reason
FROM memory_portrait
WHERE user_id = $1
ORDER BY version DESC;
