-- The persist transaction of a run in ONE round trip: the cursor
-- compare-and-set (the fence), the user's version compare-and-set, the audit
-- row, the new facts, the supersessions and the refreshed rolling summary.
-- Run as a single statement, it is its own transaction: a lost
-- compare-and-set raises and nothing is written.
--   SQLSTATE MF001: the cursor moved (another run did this slice)
--   SQLSTATE MF002: the user's facts changed since consolidation read them
--   SQLSTATE MF003: the user turned memory off (user_memory_consent) since the
--                   run read the consent; only an 'opted_out' run may commit
--   SQLSTATE MF004: the user was erased after this run's hand-over was made
--                   (memory_erasure_fence): the run writes nothing
--   SQLSTATE MF005: the cursor names no fence_key (worker.store.fence_key: HMAC of
--                   the user id under MEMFLEET_ERASE_FENCE_KEY), so no fence
--                   could be checked: a caller of an older release writes nothing
-- The consent and the fence are read under the user's advisory lock, taken
-- shared here and exclusive by an erase or a consent change, so neither can
-- land between the check and this transaction's commit.
-- Its signatures are kept across releases: the 13-argument form of an older
-- release calls the full one with every fact a stated profile fact valid from
-- p_observed_at; a caller that names no fence_key gets MF005 (its job is tried
-- again, by a worker of this release once the fleet has rolled over). A pinned row is never superseded here (MF002: the pin bumped
-- the user's version after consolidation read it).
CREATE OR REPLACE FUNCTION memfleet_commit_run(
    p_cursor            jsonb,      -- session_id, user_id, fence_key (hex),
                                    -- expected_version (0: none yet),
                                    -- last_hash, window_hash, position, processed, user_turns,
                                    -- summary (absent or null: keep the stored one) and
                                    -- handover_seq (absent: keep the stored one) and
                                    -- fence_seq (the erase fence's compare; absent:
                                    -- handover_seq; worker.protocol.payload.Snapshot.fence_seq)
    p_user_version      bigint,     -- NULL: the run writes no fact, the version is not checked
    p_run               jsonb,      -- the memory_run row (memfleet_insert_run)
    p_texts             text[],
    p_categories        text[],
    p_importances       smallint[],
    p_embeddings        halfvec[],
    p_embedding_model   text,
    p_observed_at       timestamptz,
    p_source_session_id text,
    p_sup_target        bigint[],   -- per supersession: an existing row id, or NULL ...
    p_sup_target_new    integer[],  -- ... and then the 1-based position of a row inserted here
    p_sup_successor     integer[],  -- position of the superseding new row; NULL for a DELETE
    -- per new fact, beside p_texts:
    p_scopes            text[],
    p_agents            text[],
    p_valid_from        timestamptz[],  -- NULL: p_observed_at
    p_valid_to          timestamptz[],
    p_expires_at        timestamptz[],
    p_bases             text[],
    p_confidences       real[],
    -- proposals held back: [{"fact_id", "event", "reason", "text"}]; an undecided
    -- candidate (event ADD) has no fact_id and adds "category", "importance",
    -- "scope", "agent_id"
    p_holds             jsonb,
    -- the persons to write first (memfleet_commit_persons), and who each new fact
    -- is about, then each held addition (a p_holds entry without fact_id, in
    -- p_holds' order): its "facts" array is as long as p_texts plus the additions.
    -- Shorter (a caller of the release before held additions kept their person,
    -- whose array covers p_texts alone) or NULL: the rest are about the user.
    p_persons           jsonb
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_user    text := p_cursor ->> 'user_id';
    v_summary text := p_cursor ->> 'summary';  -- NULL: no summary was due (or it failed)
    v_fence   bytea := decode(p_cursor ->> 'fence_key', 'hex');
    v_moved   bigint;
    v_run_id  bigint;
    v_new_ids bigint[];
    v_done    integer;
    v_erased  bigint;
    -- Per new fact, then per held addition: the person it is about (NULL: the user).
    v_persons bigint[];
BEGIN
    IF v_fence IS NULL THEN
        RAISE EXCEPTION 'no erase fence key' USING ERRCODE = 'MF005';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('memfleet:user:' || v_user, 0));
    SELECT erased_seq INTO v_erased FROM memory_erasure_fence
    WHERE user_key = v_fence
      AND erased_seq >= coalesce((p_cursor ->> 'fence_seq')::bigint,
                                 (p_cursor ->> 'handover_seq')::bigint, 0);
    IF FOUND THEN
        -- The detail is the erase's number (no user data): the job tells a list the
        -- erase deleted from one handed over after it (worker.pipeline.persist).
        RAISE EXCEPTION 'the user was erased after this hand-over'
            USING ERRCODE = 'MF004', DETAIL = v_erased::text;
    END IF;
    IF p_run ->> 'outcome' <> 'opted_out'
       AND EXISTS (SELECT 1 FROM user_memory_consent
                   WHERE user_id = v_user AND NOT enabled) THEN
        RAISE EXCEPTION 'the user turned memory off' USING ERRCODE = 'MF003';
    END IF;
    IF (p_cursor ->> 'expected_version')::bigint = 0 THEN
        INSERT INTO session_cursor (session_id, user_id, version, last_hash, window_hash,
                                    position, processed_count, user_turns_since_summary,
                                    summary, summary_updated_at, handover_seq)
        VALUES (p_cursor ->> 'session_id', v_user, 1, p_cursor ->> 'last_hash',
                p_cursor ->> 'window_hash', (p_cursor ->> 'position')::integer,
                (p_cursor ->> 'processed')::bigint,
                CASE WHEN v_summary IS NULL THEN (p_cursor ->> 'user_turns')::integer ELSE 0 END,
                v_summary, CASE WHEN v_summary IS NULL THEN NULL ELSE now() END,
                coalesce((p_cursor ->> 'handover_seq')::bigint, 0))
        ON CONFLICT (user_id, session_id) DO NOTHING
        RETURNING version INTO v_moved;
    ELSE
        UPDATE session_cursor
        SET version = version + 1, last_hash = p_cursor ->> 'last_hash',
            window_hash = p_cursor ->> 'window_hash',
            position = (p_cursor ->> 'position')::integer,
            processed_count = processed_count + (p_cursor ->> 'processed')::bigint,
            user_turns_since_summary = CASE
                WHEN v_summary IS NULL
                THEN user_turns_since_summary + (p_cursor ->> 'user_turns')::integer
                ELSE 0 END,
            summary = coalesce(v_summary, summary),
            summary_updated_at = CASE WHEN v_summary IS NULL THEN summary_updated_at
                                      ELSE now() END,
            -- Never backwards: lists are taken in order (worker.pipeline.cursor).
            handover_seq = greatest(handover_seq,
                                    coalesce((p_cursor ->> 'handover_seq')::bigint, 0)),
            updated_at = now()
        WHERE session_id = p_cursor ->> 'session_id'
          AND version = (p_cursor ->> 'expected_version')::bigint
          AND user_id = v_user
        RETURNING version INTO v_moved;
    END IF;
    IF v_moved IS NULL THEN
        RAISE EXCEPTION 'the session cursor moved' USING ERRCODE = 'MF001';
    END IF;

    IF p_user_version IS NOT NULL
       AND memfleet_bump_user_version(v_user, p_user_version) IS NULL THEN
        RAISE EXCEPTION 'the user''s facts changed' USING ERRCODE = 'MF002';
    END IF;

    v_run_id := memfleet_insert_run(p_run);

    IF p_persons IS NOT NULL THEN
        v_persons := memfleet_commit_persons(v_user, p_persons, p_observed_at,
                                             p_source_session_id);
    END IF;

    IF cardinality(p_texts) > 0 THEN
        -- Identity values are drawn in ORDER BY order: sorted, they follow p_texts.
        WITH inserted AS (
            INSERT INTO memory_fact (user_id, text, category, importance, embedding,
                                     embedding_model, observed_at, source_session_id,
                                     source_kind, run_id, scope, agent_id, valid_from,
                                     valid_to, expires_at, basis, confidence, person_id)
            SELECT v_user, t.text, t.category, t.importance, t.embedding, p_embedding_model,
                   p_observed_at, p_source_session_id, 'extracted', v_run_id, t.scope,
                   t.agent_id, coalesce(t.valid_from, p_observed_at), t.valid_to,
                   t.expires_at, t.basis, t.confidence, v_persons[t.ord]
            FROM unnest(p_texts, p_categories, p_importances, p_embeddings, p_scopes,
                        p_agents, p_valid_from, p_valid_to, p_expires_at, p_bases,
                        p_confidences)
                 WITH ORDINALITY AS t (text, category, importance, embedding, scope,
                                       agent_id, valid_from, valid_to, expires_at, basis,
                                       confidence, ord)
            ORDER BY t.ord
            RETURNING id
        )
        SELECT array_agg(id ORDER BY id) INTO v_new_ids FROM inserted;
    END IF;

    IF cardinality(p_sup_target) > 0 THEN
        -- A superseded row's validity ends where its successor's begins (a DELETE:
        -- when it was said), unless the conversation gave the end already.
        UPDATE memory_fact AS f
        SET superseded_at = p_observed_at, superseded_by = v_new_ids[s.successor],
            superseded_reason = CASE WHEN s.successor IS NULL THEN 'deleted' ELSE 'updated' END,
            valid_to = coalesce(f.valid_to, greatest(f.valid_from, coalesce(
                (SELECT n.valid_from FROM memory_fact AS n
                 WHERE n.user_id = v_user AND n.id = v_new_ids[s.successor]),
                p_observed_at)))
        FROM unnest(p_sup_target, p_sup_target_new, p_sup_successor)
             AS s (target, target_new, successor)
        WHERE f.id = coalesce(s.target, v_new_ids[s.target_new])
          AND f.user_id = v_user AND f.superseded_at IS NULL AND NOT f.pinned;
        GET DIAGNOSTICS v_done = ROW_COUNT;
        IF v_done <> cardinality(p_sup_target) THEN
            -- Only a writer that skipped the user's version could get here.
            RAISE EXCEPTION 'a fact to supersede is no longer active' USING ERRCODE = 'MF002';
        END IF;
    END IF;

    INSERT INTO memory_held_proposal (user_id, fact_id, run_id, event, reason, text, session_id)
    SELECT v_user, f.id, v_run_id, h.event, h.reason, h.text, p_source_session_id
    FROM jsonb_to_recordset(coalesce(p_holds, '[]'::jsonb))
         AS h (fact_id bigint, event text, reason text, text text)
    JOIN memory_fact AS f ON f.id = h.fact_id AND f.user_id = v_user;
    -- Undecided candidates, held as additions (schema/0014): a statement of its own,
    -- planned only when a run holds one. The k-th addition is about the person of
    -- v_persons' entry after the new facts' (schema/0020: accepting it writes the
    -- fact about them); a person met only in it was created all the same (the user
    -- named them), and one merged meanwhile was followed by memfleet_commit_persons.
    IF jsonb_path_exists(coalesce(p_holds, '[]'::jsonb), '$[*] ? (@.fact_id == null)') THEN
        INSERT INTO memory_held_proposal (user_id, run_id, event, reason, text, session_id,
                                          category, importance, scope, agent_id, person_id)
        SELECT v_user, v_run_id, h.event, h.reason, h.text, p_source_session_id,
               h.category, h.importance, h.scope, h.agent_id,
               v_persons[coalesce(cardinality(p_texts), 0) + h.k]
        FROM (SELECT a.*, row_number() OVER (ORDER BY e.ord) AS k
              FROM jsonb_array_elements(p_holds) WITH ORDINALITY AS e (value, ord)
              CROSS JOIN LATERAL jsonb_to_record(e.value)
                   AS a (fact_id bigint, event text, reason text, text text, category text,
                         importance smallint, scope text, agent_id text)
              WHERE a.fact_id IS NULL) AS h
        ORDER BY h.k;
    END IF;
    RETURN v_run_id;
END;
$$;

-- The previous release's form (before persons, schema/0016): every new fact is
-- about the user.
CREATE OR REPLACE FUNCTION memfleet_commit_run(
    p_cursor jsonb, p_user_version bigint, p_run jsonb, p_texts text[], p_categories text[],
    p_importances smallint[], p_embeddings halfvec[], p_embedding_model text,
    p_observed_at timestamptz, p_source_session_id text, p_sup_target bigint[],
    p_sup_target_new integer[], p_sup_successor integer[], p_scopes text[], p_agents text[],
    p_valid_from timestamptz[], p_valid_to timestamptz[], p_expires_at timestamptz[],
    p_bases text[], p_confidences real[], p_holds jsonb
) RETURNS bigint
LANGUAGE sql AS $$
    SELECT memfleet_commit_run(
        p_cursor, p_user_version, p_run, p_texts, p_categories, p_importances, p_embeddings,
        p_embedding_model, p_observed_at, p_source_session_id, p_sup_target, p_sup_target_new,
        p_sup_successor, p_scopes, p_agents, p_valid_from, p_valid_to, p_expires_at, p_bases,
        p_confidences, p_holds, NULL::jsonb);
$$;

-- The form of the release before that.
CREATE OR REPLACE FUNCTION memfleet_commit_run(
    p_cursor jsonb, p_user_version bigint, p_run jsonb, p_texts text[], p_categories text[],
    p_importances smallint[], p_embeddings halfvec[], p_embedding_model text,
    p_observed_at timestamptz, p_source_session_id text, p_sup_target bigint[],
    p_sup_target_new integer[], p_sup_successor integer[]
) RETURNS bigint
LANGUAGE sql AS $$
    SELECT memfleet_commit_run(
        p_cursor, p_user_version, p_run, p_texts, p_categories, p_importances, p_embeddings,
        p_embedding_model, p_observed_at, p_source_session_id, p_sup_target, p_sup_target_new,
        p_sup_successor,
        array_fill('profile'::text, ARRAY[cardinality(p_texts)]),
        array_fill(NULL::text, ARRAY[cardinality(p_texts)]),
        array_fill(NULL::timestamptz, ARRAY[cardinality(p_texts)]),
        array_fill(NULL::timestamptz, ARRAY[cardinality(p_texts)]),
        array_fill(NULL::timestamptz, ARRAY[cardinality(p_texts)]),
        array_fill('stated'::text, ARRAY[cardinality(p_texts)]),
        array_fill(0.9::real, ARRAY[cardinality(p_texts)]),
        '[]'::jsonb, NULL::jsonb);
$$;
