-- The persons part of a run's commit (docs/persons.md), called by
-- memfleet_commit_run inside its transaction, after its fences, before the new
-- facts are inserted. It writes the persons the run met for the first time and
-- the new labels of persons it learned more about, and returns, per entry of
-- "facts", the person it is about (NULL: the user). memfleet_commit_run's
-- entries are its new facts (in the order of p_texts), then its held additions
-- (in the order of p_holds).
--
-- p_persons: {"create": [{"display_name", "relation", "aliases"}],
--             "relabel": [{"person_id", "display_name", "relation", "aliases"}],
--             "facts": [null | {"person_id": id} | {"new": 1-based position in create}]}
-- Every person of "create" is written, whether or not a new fact names it: one
-- met only in a held addition is a person the user named all the same.
-- A person to create that another run of the user created meanwhile (the same
-- name, or without a name the same relation, among the user's unmerged persons)
-- is that person, not a second one. A person merged into another meanwhile
-- stands for the one it was merged into. A relabel whose person is gone or
-- merged is skipped: the label it would replace is no longer the current one.
CREATE OR REPLACE FUNCTION memfleet_commit_persons(
    p_user         text,
    p_persons      jsonb,
    p_observed_at  timestamptz,
    p_session_id   text
) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_created bigint[] := '{}';
    v_result  bigint[] := '{}';
    v_id      bigint;
    v_old     bigint;
    v_new     bigint;
    v_depth   integer;
    r         record;
    f         jsonb;
BEGIN
    FOR r IN SELECT * FROM jsonb_to_recordset(coalesce(p_persons -> 'create', '[]'::jsonb))
                 AS c (display_name text, relation text, aliases text[])
    LOOP
        SELECT p.id INTO v_id
        FROM memory_person AS p
        JOIN memory_person_label AS l
          ON l.user_id = p_user AND l.person_id = p.id AND l.superseded_at IS NULL
        WHERE p.user_id = p_user AND p.merged_into IS NULL
          AND CASE WHEN r.display_name IS NOT NULL
                   THEN lower(l.display_name) = lower(r.display_name)
                   ELSE l.display_name IS NULL AND lower(l.relation) = lower(r.relation) END
        ORDER BY p.id
        LIMIT 1;
        IF v_id IS NULL THEN
            INSERT INTO memory_person (user_id, created_from, source_session_id, created_at)
            VALUES (p_user, 'conversation', p_session_id, p_observed_at)
            RETURNING id INTO v_id;
            INSERT INTO memory_person_label (user_id, person_id, display_name, relation,
                                             aliases, set_by, observed_at)
            VALUES (p_user, v_id, r.display_name, r.relation, coalesce(r.aliases, '{}'),
                    'conversation', p_observed_at);
        END IF;
        v_created := array_append(v_created, v_id);
    END LOOP;

    FOR r IN SELECT * FROM jsonb_to_recordset(coalesce(p_persons -> 'relabel', '[]'::jsonb))
                 AS c (person_id bigint, display_name text, relation text, aliases text[])
    LOOP
        UPDATE memory_person_label AS l
        SET superseded_at = p_observed_at
        FROM memory_person AS p
        WHERE l.user_id = p_user AND l.person_id = r.person_id AND l.superseded_at IS NULL
          AND p.user_id = p_user AND p.id = r.person_id AND p.merged_into IS NULL
        RETURNING l.id INTO v_old;
        CONTINUE WHEN v_old IS NULL;
        INSERT INTO memory_person_label (user_id, person_id, display_name, relation, aliases,
                                         set_by, observed_at)
        VALUES (p_user, r.person_id, r.display_name, r.relation, coalesce(r.aliases, '{}'),
                'conversation', p_observed_at)
        RETURNING id INTO v_new;
        UPDATE memory_person_label SET superseded_by = v_new
        WHERE user_id = p_user AND id = v_old;
        v_old := NULL;
    END LOOP;

    FOR f IN SELECT value FROM jsonb_array_elements(coalesce(p_persons -> 'facts', '[]'::jsonb))
    LOOP
        IF f IS NULL OR jsonb_typeof(f) = 'null' THEN
            v_id := NULL;
        ELSIF f ? 'new' THEN
            v_id := v_created[(f ->> 'new')::integer];
        ELSE
            v_id := (f ->> 'person_id')::bigint;
            -- Merged meanwhile: the person it was merged into (a chain of merges is short).
            v_depth := 0;
            LOOP
                SELECT merged_into INTO v_new FROM memory_person
                WHERE user_id = p_user AND id = v_id;
                EXIT WHEN v_new IS NULL OR v_depth >= 16;
                v_id := v_new;
                v_depth := v_depth + 1;
            END LOOP;
        END IF;
        v_result := array_append(v_result, v_id);
    END LOOP;
    RETURN v_result;
END;
$$;
