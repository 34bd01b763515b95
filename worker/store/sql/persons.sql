-- The people in a user's life (docs/persons.md; schema/0016_persons.sql).
-- Every query is scoped to one user by its first parameter: another user's
-- person id reads exactly like an id that does not exist.

-- name: persons
-- The user's persons with their current label, unmerged ones unless $2, by id.
SELECT p.id, p.user_id, l.display_name, l.relation, l.aliases, p.created_from,
       p.source_session_id, p.created_at, l.id AS label_id, l.observed_at AS labelled_at,
       l.set_by AS label_set_by, p.merged_into, p.merged_at
FROM memory_person AS p
JOIN memory_person_label AS l
  ON l.user_id = $1 AND l.person_id = p.id AND l.superseded_at IS NULL
WHERE p.user_id = $1 AND (p.merged_into IS NULL OR $2::boolean)
ORDER BY p.id;

-- name: person
SELECT p.id, p.user_id, l.display_name, l.relation, l.aliases, p.created_from,
       p.source_session_id, p.created_at, l.id AS label_id, l.observed_at AS labelled_at,
       l.set_by AS label_set_by, p.merged_into, p.merged_at
FROM memory_person AS p
JOIN memory_person_label AS l
  ON l.user_id = $1 AND l.person_id = p.id AND l.superseded_at IS NULL
WHERE p.user_id = $1 AND p.id = $2;

-- name: lock_person
-- A person the user changes (relabel, merge), locked for the transaction; merged
-- ones too, so the caller can tell "merged" from "missing".
SELECT id, merged_into FROM memory_person WHERE user_id = $1 AND id = $2 FOR UPDATE;

-- name: person_facts
-- Active, unexpired facts about the user's persons ($2: one person; NULL: all of
-- them), behind the consent gate ($3, as fact_rules.sql's: NULL reads regardless),
-- by person, then the stable order of a prompt (pinned, importance, id).
SELECT {{fact_columns}}
FROM memory_fact
WHERE user_id = $1 AND person_id IS NOT NULL AND ($2::bigint IS NULL OR person_id = $2)
  AND {{active}} AND {{consent_gate($3)}}
ORDER BY person_id, pinned DESC, importance DESC, id
LIMIT $4;

-- name: insert_person
INSERT INTO memory_person (user_id, created_from, source_session_id)
VALUES ($1, $2, NULL)
RETURNING id;

-- name: insert_label
-- A person's new current label ($3 name, $4 relation, $5 aliases, $6 who set it);
-- the one it replaces is ended first (end_label), one current label per person.
INSERT INTO memory_person_label (user_id, person_id, display_name, relation, aliases, set_by)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id;

-- name: end_label
UPDATE memory_person_label SET superseded_at = now()
WHERE user_id = $1 AND person_id = $2 AND superseded_at IS NULL
RETURNING id;

-- name: link_label
UPDATE memory_person_label SET superseded_by = $3 WHERE user_id = $1 AND id = $2;

-- name: lock_fact
-- The active, unexpired fact to move to another person (or back to the user).
SELECT id, person_id FROM memory_fact
WHERE user_id = $1 AND id = $2 AND {{active}}
FOR UPDATE;

-- name: move_facts
-- The user's correction of who facts are about: each active fact of $2 gets a
-- new version about $3 (NULL: the user) with everything else kept (text,
-- embedding, dates, trust), and ends as 'updated' by it. The attribution was
-- wrong from the start, so the old version was never true (valid for no time),
-- as an edit without a valid_from (docs/memory_model.md). Returns the new rows.
WITH old AS (
    SELECT * FROM memory_fact
    WHERE user_id = $1 AND id = ANY($2::bigint[]) AND {{active}}
    ORDER BY id
), moved AS (
    INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                             observed_at, source_session_id, source_kind, run_id, scope,
                             agent_id, valid_from, valid_to, expires_at, pinned, basis,
                             confidence, import_key, written_via, person_id)
    SELECT $1, text, category, importance, embedding, embedding_model, now(),
           source_session_id, source_kind, run_id, scope, agent_id, valid_from, valid_to,
           expires_at, pinned, basis, confidence, NULL, written_via, $3::bigint
    FROM old
    ORDER BY id
    RETURNING *
), pairs AS (
    -- Identity values are drawn in ORDER BY order: the n-th new row replaces the n-th old.
    SELECT o.id AS old_id, m.id AS new_id, m.valid_from
    FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM old) AS o
    JOIN (SELECT id, valid_from, row_number() OVER (ORDER BY id) AS n FROM moved) AS m
      ON m.n = o.n
), ended AS (
    UPDATE memory_fact AS f
    SET superseded_at = now(), superseded_by = p.new_id, superseded_reason = 'updated',
        valid_to = f.valid_from
    FROM pairs AS p
    WHERE f.user_id = $1 AND f.id = p.old_id
    RETURNING f.id
)
SELECT {{fact_columns}}, (SELECT count(*) FROM ended) AS ended
FROM moved
ORDER BY id;

-- name: active_fact_ids
-- The active facts of a person ($2), to move them all (a merge).
SELECT id FROM memory_fact
WHERE user_id = $1 AND person_id = $2 AND {{active}}
ORDER BY id;

-- name: move_held
-- A merge: the open held additions about the merged person ($2) are about the
-- person it is merged into ($3) from now on, in the transaction that moves its
-- facts, so accepting one writes a fact about a person who is not merged
-- (corrections.sql insert_addition). An answered one keeps whom it was about
-- when answered: the fact its accept wrote moved with the others.
UPDATE memory_held_proposal SET person_id = $3
WHERE user_id = $1 AND person_id = $2 AND resolution IS NULL;

-- name: mark_merged
UPDATE memory_person SET merged_into = $3, merged_at = now()
WHERE user_id = $1 AND id = $2 AND merged_into IS NULL;
