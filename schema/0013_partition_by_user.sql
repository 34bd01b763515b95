-- The per-user tables that grow with use, hash-partitioned by user_id
-- (docs/capacity.md, "PostgreSQL partitioned by user"): memory_fact (every
-- version of every fact), memory_held_proposal (it references facts, so it
-- lives beside them) and session_cursor (one row per session ever seen).
-- Every statement of the store names one user, so each reads one partition;
-- a VACUUM or an index rebuild works on one partition at a time.
--
-- Not partitioned: user_memory_state and user_memory_consent (one small row
-- per user, keyed by user_id already), and memory_run, the audit log: a run
-- that fails before it knows its user, or whose user was erased meanwhile,
-- keeps its row with no user (schema/0008_run_owners.sql), and a partition
-- key cannot be NULL in a key. It is written once per run and read by user
-- only for the right of access and the erase (memory_run_user_idx).
--
-- `{pg_partitions}` is MEMFLEET_PG_PARTITIONS when this migration runs (a new
-- database: at install), recorded in memfleet_setting; worker/store/migrate.py
-- refuses a later run that asks for another count.
--
-- Keys: a unique key of a partitioned table includes its partition key, so
-- rows are keyed (user_id, id) and the foreign keys between facts, and from
-- held proposals to facts, carry the user too: a chain or a proposal cannot
-- point at another user's row (what the code checked, the schema now says).
-- The rows, their ids and the id sequences are kept as they are.

INSERT INTO memfleet_setting (key, value) VALUES ('pg_partitions', '{pg_partitions}');

-- The rows, and where each id sequence stands (an id is never given twice,
-- even one a rolled-back insert drew), before the old tables go.
CREATE TEMP TABLE fact_rows ON COMMIT DROP AS SELECT * FROM memory_fact;
CREATE TEMP TABLE held_rows ON COMMIT DROP AS SELECT * FROM memory_held_proposal;
CREATE TEMP TABLE cursor_rows ON COMMIT DROP AS SELECT * FROM session_cursor;
CREATE TEMP TABLE id_marks ON COMMIT DROP AS
SELECT greatest((SELECT max(id) FROM memory_fact),
                pg_sequence_last_value(pg_get_serial_sequence('memory_fact', 'id'))) AS fact,
       greatest((SELECT max(id) FROM memory_held_proposal),
                pg_sequence_last_value(pg_get_serial_sequence('memory_held_proposal', 'id')))
           AS held;

DROP TABLE memory_held_proposal;
DROP TABLE memory_fact;
DROP TABLE session_cursor;

-- One row per atomic fact (baseline.sql and 0007 say what each column means).
CREATE TABLE memory_fact (
    id                bigint GENERATED ALWAYS AS IDENTITY,
    user_id           text        NOT NULL,
    text              text        NOT NULL,
    category          text        NOT NULL,
    importance        smallint    NOT NULL,
    embedding         halfvec     NOT NULL,
    embedding_model   text        NOT NULL,
    observed_at       timestamptz NOT NULL,
    superseded_at     timestamptz,
    superseded_by     bigint,
    source_session_id text,
    source_kind       text        NOT NULL DEFAULT 'extracted',
    run_id            bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    text_search       tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
    scope             text        NOT NULL DEFAULT 'profile',
    agent_id          text,
    valid_from        timestamptz NOT NULL DEFAULT now(),
    valid_to          timestamptz,
    expires_at        timestamptz,
    pinned            boolean     NOT NULL DEFAULT false,
    basis             text        NOT NULL DEFAULT 'stated',
    confidence        real        NOT NULL DEFAULT 0.9,
    superseded_reason text,
    import_key        text,
    embedding_dim     integer GENERATED ALWAYS AS (vector_dims(embedding)) STORED,
    CONSTRAINT memory_fact_pkey PRIMARY KEY (user_id, id),
    CONSTRAINT memory_fact_category_check CHECK (
        category IN ('preference', 'fact', 'event', 'relationship', 'decision', 'general')),
    CONSTRAINT memory_fact_importance_check CHECK (importance BETWEEN 1 AND 10),
    CONSTRAINT memory_fact_check CHECK (superseded_by IS NULL OR superseded_at IS NOT NULL),
    CONSTRAINT memory_fact_source_kind_check CHECK (
        source_kind IN ('extracted', 'manual', 'backfill', 'imported')),
    CONSTRAINT memory_fact_scope_check CHECK (scope IN ('profile', 'relationship')),
    CONSTRAINT memory_fact_agent_check CHECK ((scope = 'relationship') = (agent_id IS NOT NULL)),
    CONSTRAINT memory_fact_valid_check CHECK (valid_to IS NULL OR valid_to >= valid_from),
    CONSTRAINT memory_fact_basis_check CHECK (basis IN ('stated', 'inferred')),
    CONSTRAINT memory_fact_confidence_check CHECK (confidence >= 0 AND confidence <= 1),
    CONSTRAINT memory_fact_reason_check CHECK (
        superseded_reason IS NULL
        OR superseded_reason IN ('updated', 'deleted', 'expired', 'removed'))
) PARTITION BY HASH (user_id);
-- In line, never TOASTed (baseline.sql); set on the parent, every partition gets it.
ALTER TABLE memory_fact ALTER COLUMN embedding SET STORAGE PLAIN;

CREATE TABLE memory_held_proposal (
    id             bigint GENERATED ALWAYS AS IDENTITY,
    user_id        text        NOT NULL,
    fact_id        bigint      NOT NULL,
    run_id         bigint,
    event          text        NOT NULL,
    reason         text        NOT NULL,
    text           text,
    session_id     text,
    proposed_at    timestamptz NOT NULL DEFAULT now(),
    resolution     text,
    resolved_at    timestamptz,
    resolved_by    text,
    result_fact_id bigint,
    CONSTRAINT memory_held_proposal_pkey PRIMARY KEY (user_id, id),
    CONSTRAINT memory_held_proposal_event_check CHECK (event IN ('UPDATE', 'DELETE')),
    CONSTRAINT memory_held_proposal_reason_check CHECK (reason IN ('pinned', 'outranked')),
    CONSTRAINT memory_held_proposal_resolution_check CHECK (
        resolution IN ('accepted', 'dismissed')),
    CONSTRAINT memory_held_proposal_resolved_check CHECK (
        (resolution IS NULL) = (resolved_at IS NULL)
        AND (resolution IS NULL) = (resolved_by IS NULL)
        AND (result_fact_id IS NULL OR resolution = 'accepted'))
) PARTITION BY HASH (user_id);

CREATE TABLE session_cursor (
    session_id               text        NOT NULL,
    user_id                  text        NOT NULL,
    version                  bigint      NOT NULL,
    last_hash                text        NOT NULL,
    window_hash              text        NOT NULL,
    position                 integer     NOT NULL,
    processed_count          bigint      NOT NULL DEFAULT 0,
    user_turns_since_summary integer     NOT NULL DEFAULT 0,
    summary                  text,
    summary_updated_at       timestamptz,
    updated_at               timestamptz NOT NULL DEFAULT now(),
    handover_seq             bigint      NOT NULL DEFAULT 0,
    CONSTRAINT session_cursor_pkey PRIMARY KEY (user_id, session_id)
) PARTITION BY HASH (user_id);

-- The partitions: <table>_p<remainder>. A partition of facts keeps a row up to a
-- page whole (0012): the option is per partition, a partitioned table has no storage.
DO $$
DECLARE
    v_count integer := (SELECT value::integer FROM memfleet_setting WHERE key = 'pg_partitions');
    v_table text;
BEGIN
    IF v_count IS NULL OR v_count < 1 THEN
        RAISE EXCEPTION 'pg_partitions must be 1 or more';
    END IF;
    FOREACH v_table IN ARRAY ARRAY['memory_fact', 'memory_held_proposal', 'session_cursor'] LOOP
        FOR v_remainder IN 0 .. v_count - 1 LOOP
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS %s, REMAINDER %s)%s',
                v_table || '_p' || v_remainder, v_table, v_count, v_remainder,
                CASE WHEN v_table = 'memory_fact' THEN ' WITH (toast_tuple_target = 8160)'
                     ELSE '' END);
        END LOOP;
    END LOOP;
END;
$$;

INSERT INTO memory_fact (id, user_id, text, category, importance, embedding, embedding_model,
                         observed_at, superseded_at, superseded_by, source_session_id,
                         source_kind, run_id, created_at, scope, agent_id, valid_from, valid_to,
                         expires_at, pinned, basis, confidence, superseded_reason, import_key)
OVERRIDING SYSTEM VALUE
SELECT id, user_id, text, category, importance, embedding, embedding_model, observed_at,
       superseded_at, superseded_by, source_session_id, source_kind, run_id, created_at, scope,
       agent_id, valid_from, valid_to, expires_at, pinned, basis, confidence, superseded_reason,
       import_key
FROM fact_rows;

INSERT INTO memory_held_proposal (id, user_id, fact_id, run_id, event, reason, text, session_id,
                                  proposed_at, resolution, resolved_at, resolved_by,
                                  result_fact_id)
OVERRIDING SYSTEM VALUE
SELECT id, user_id, fact_id, run_id, event, reason, text, session_id, proposed_at, resolution,
       resolved_at, resolved_by, result_fact_id
FROM held_rows;

INSERT INTO session_cursor SELECT * FROM cursor_rows;

SELECT setval(pg_get_serial_sequence('memory_fact', 'id'), coalesce(fact, 1), fact IS NOT NULL),
       setval(pg_get_serial_sequence('memory_held_proposal', 'id'), coalesce(held, 1),
              held IS NOT NULL)
FROM id_marks;

-- The indexes of baseline.sql and 0007, each now within a user's partition. The
-- primary key (user_id, id) stands in for the old (user_id) index and for the
-- held proposals' (user_id, id).
CREATE INDEX memory_fact_active_user_idx ON memory_fact (user_id) WHERE superseded_at IS NULL;
-- A chain read backwards (memory_api.sql chain) and the foreign key's checks.
CREATE INDEX memory_fact_superseded_by_idx ON memory_fact (user_id, superseded_by)
    WHERE superseded_by IS NOT NULL;
CREATE INDEX memory_fact_text_search_idx
    ON memory_fact USING gin (text_search) WHERE superseded_at IS NULL;
CREATE INDEX memory_fact_expiry_idx ON memory_fact (expires_at)
    WHERE superseded_at IS NULL AND expires_at IS NOT NULL;
CREATE UNIQUE INDEX memory_fact_import_key_idx ON memory_fact (user_id, import_key)
    WHERE import_key IS NOT NULL;
CREATE INDEX memory_fact_active_model_idx ON memory_fact (embedding_model, embedding_dim, user_id)
    WHERE superseded_at IS NULL;
-- Proposals by the fact they were held against: the cascade of an erase.
CREATE INDEX memory_held_proposal_fact_idx ON memory_held_proposal (user_id, fact_id);

-- Foreign keys within one user's rows, checked now over the copied rows.
ALTER TABLE memory_fact ADD CONSTRAINT memory_fact_superseded_by_fkey
    FOREIGN KEY (user_id, superseded_by) REFERENCES memory_fact (user_id, id);
ALTER TABLE memory_held_proposal ADD CONSTRAINT memory_held_proposal_fact_id_fkey
    FOREIGN KEY (user_id, fact_id) REFERENCES memory_fact (user_id, id) ON DELETE CASCADE;
ALTER TABLE memory_held_proposal ADD CONSTRAINT memory_held_proposal_result_fact_id_fkey
    FOREIGN KEY (user_id, result_fact_id) REFERENCES memory_fact (user_id, id)
    ON DELETE SET NULL (result_fact_id);

ANALYZE memory_fact;
ANALYZE memory_held_proposal;
ANALYZE session_cursor;
