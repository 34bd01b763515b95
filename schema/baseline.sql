-- memfleet's schema as it stands: every table and index, in one file.
--
-- A new database gets this file, recorded as migration BASELINE_VERSION
-- (worker/store/migrate.py); changes to come go in numbered files
-- (schema/NNNN_name.sql, NNNN above the baseline), applied once each, in order.
-- Functions live in schema/routines/ and are re-applied whenever they change.
-- `{embed_dim}` is filled in by `memfleet migrate` from MEMFLEET_EMBED_DIM and
-- recorded in memfleet_setting, so a worker started with another dimension
-- refuses to boot instead of failing on every insert.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE memfleet_setting (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO memfleet_setting (key, value) VALUES ('embed_dim', '{embed_dim}');

-- One row per atomic fact. Rows are never updated in place except to be
-- superseded: the history is the data.
CREATE TABLE memory_fact (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id           text        NOT NULL,
    text              text        NOT NULL,
    category          text        NOT NULL
        CHECK (category IN ('preference', 'fact', 'event', 'relationship', 'decision', 'general')),
    importance        smallint    NOT NULL CHECK (importance BETWEEN 1 AND 10),
    embedding         halfvec({embed_dim}) NOT NULL,
    embedding_model   text        NOT NULL,
    observed_at       timestamptz NOT NULL,
    superseded_at     timestamptz,
    superseded_by     bigint REFERENCES memory_fact (id),
    source_session_id text,
    source_kind       text        NOT NULL DEFAULT 'extracted'
        CHECK (source_kind IN ('extracted', 'manual', 'backfill')),
    run_id            bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- Word search for the memory API's hybrid search. 'simple': no stemming and
    -- no stop words, so names, tools and places match as written in any language.
    text_search       tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
    -- superseded_by only ever points at a newer row of the same user (checked in code)
    CHECK (superseded_by IS NULL OR superseded_at IS NOT NULL)
);
-- Kept in line, never TOASTed, so the exact per-user scan reads one heap tuple
-- per fact (docs/architecture.md, "Storage").
ALTER TABLE memory_fact ALTER COLUMN embedding SET STORAGE PLAIN;

-- Exact per-user search: a partial btree on active rows, and no global ANN
-- index (a shared HNSW with a per-user filter loses recall; docs/architecture.md).
CREATE INDEX memory_fact_active_user_idx ON memory_fact (user_id) WHERE superseded_at IS NULL;
CREATE INDEX memory_fact_user_idx ON memory_fact (user_id);
CREATE INDEX memory_fact_superseded_by_idx ON memory_fact (superseded_by)
    WHERE superseded_by IS NOT NULL;
-- Only active facts are searched by words; superseded rows need no entry.
CREATE INDEX memory_fact_text_search_idx
    ON memory_fact USING gin (text_search) WHERE superseded_at IS NULL;

-- Per-user version, bumped by every transaction that changes a user's facts.
-- Consolidation reads it with the neighbours; persist compares and bumps it,
-- so two sessions of one user cannot both ADD what neither saw.
CREATE TABLE user_memory_state (
    user_id    text PRIMARY KEY,
    version    bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The per-session cursor. Postgres is its source of truth: it advances in the
-- same transaction as the fact writes (compare-and-set on version).
CREATE TABLE session_cursor (
    session_id        text PRIMARY KEY,
    user_id           text        NOT NULL,
    version           bigint      NOT NULL,
    last_hash         text        NOT NULL,  -- sha256("role:content") of the last processed message
    window_hash       text        NOT NULL,  -- hash of the hashes of the messages ending there
    position          integer     NOT NULL,  -- its index in the list it was found in
    processed_count   bigint      NOT NULL DEFAULT 0,
    user_turns_since_summary integer NOT NULL DEFAULT 0,
    summary           text,
    summary_updated_at timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One row per run of the job, whatever its outcome.
CREATE TABLE memory_run (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           text        NOT NULL,
    job_try          integer     NOT NULL DEFAULT 1,
    session_id       text,
    user_id          text,
    outcome          text        NOT NULL,
    error            text,
    slice_first_hash text,
    slice_last_hash  text,
    slice_len        integer     NOT NULL DEFAULT 0,
    candidates       integer     NOT NULL DEFAULT 0,
    added            integer     NOT NULL DEFAULT 0,
    updated          integer     NOT NULL DEFAULT 0,
    deleted          integer     NOT NULL DEFAULT 0,
    unchanged        integer     NOT NULL DEFAULT 0,
    rejected         integer     NOT NULL DEFAULT 0,
    consolidation_attempts integer NOT NULL DEFAULT 0,
    input_tokens     integer     NOT NULL DEFAULT 0,
    output_tokens    integer     NOT NULL DEFAULT 0,
    timings_ms       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_run_session_idx ON memory_run (session_id, id);
CREATE INDEX memory_run_outcome_idx ON memory_run (outcome, id);
