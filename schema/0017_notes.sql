-- Notes beside facts (docs/notes.md): free-form narrative context an extraction
-- answer may carry beside its atomic facts ("considering a kitchen renovation,
-- budget about $40k, timeline unclear"). A table of their own, not a tier of
-- memory_fact: every read, consolidation, export and count of facts (and the
-- contract's `memfleet facts --json`) keeps meaning facts without a filter it
-- could forget, and a note carries none of a fact's category, importance,
-- scope or validity. What a note shares with a fact it has as its own columns:
-- supersession (never overwritten, never deleted but by an erase), an embedding
-- of the fleet's model (in line, never TOASTed, for the exact per-user scan),
-- the word vector of the hybrid search, and hash partitioning by user_id
-- (schema/0013_partition_by_user.sql): every statement names one user.
--
-- A note ends ('superseded_reason') as:
--   updated  - a later note of the same session said the same thing anew
--              (superseded_by names it);
--   removed  - the user removed it (the memory API, the panel);
--   promoted - the promotion job made it, with similar notes of other sessions,
--              a fact: promoted_to names that fact.
CREATE TABLE memory_note (
    id                bigint GENERATED ALWAYS AS IDENTITY,
    user_id           text        NOT NULL,
    text              text        NOT NULL,
    embedding         halfvec     NOT NULL,
    embedding_model   text        NOT NULL,
    embedding_dim     integer GENERATED ALWAYS AS (vector_dims(embedding)) STORED,
    observed_at       timestamptz NOT NULL,
    source_session_id text,
    run_id            bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    superseded_at     timestamptz,
    superseded_by     bigint,
    superseded_reason text,
    promoted_to       bigint,
    text_search       tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
    CONSTRAINT memory_note_pkey PRIMARY KEY (user_id, id),
    CONSTRAINT memory_note_text_check CHECK (length(text) BETWEEN 1 AND 2000),
    CONSTRAINT memory_note_superseded_check CHECK (
        (superseded_at IS NULL) = (superseded_reason IS NULL)
        AND (superseded_by IS NULL OR superseded_reason = 'updated')),
    CONSTRAINT memory_note_reason_check CHECK (
        superseded_reason IS NULL OR superseded_reason IN ('updated', 'removed', 'promoted')),
    CONSTRAINT memory_note_promoted_check CHECK (
        (superseded_reason = 'promoted') = (promoted_to IS NOT NULL))
) PARTITION BY HASH (user_id);
-- In line, never TOASTed (baseline.sql); set on the parent, every partition gets it.
ALTER TABLE memory_note ALTER COLUMN embedding SET STORAGE PLAIN;

-- The partitions: memory_note_p<remainder>, as many as memory_fact's (0013).
DO $$
DECLARE
    v_count integer := (SELECT value::integer FROM memfleet_setting WHERE key = 'pg_partitions');
BEGIN
    IF v_count IS NULL OR v_count < 1 THEN
        RAISE EXCEPTION 'pg_partitions must be 1 or more';
    END IF;
    FOR v_remainder IN 0 .. v_count - 1 LOOP
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF memory_note FOR VALUES WITH (MODULUS %s, REMAINDER %s)'
            ' WITH (toast_tuple_target = 8160)', 'memory_note_p' || v_remainder, v_count,
            v_remainder);
    END LOOP;
END;
$$;

-- The user's active notes: the exact scans of the pipeline's same-session check,
-- the search and the promotion job (no ANN index, as for facts).
CREATE INDEX memory_note_active_user_idx ON memory_note (user_id) WHERE superseded_at IS NULL;
CREATE INDEX memory_note_text_search_idx
    ON memory_note USING gin (text_search) WHERE superseded_at IS NULL;
-- Which notes a fact was promoted from (the link, read from the fact's side).
CREATE INDEX memory_note_promoted_to_idx ON memory_note (user_id, promoted_to)
    WHERE promoted_to IS NOT NULL;
CREATE INDEX memory_note_superseded_by_idx ON memory_note (user_id, superseded_by)
    WHERE superseded_by IS NOT NULL;

-- Within one user's rows: a chain never points at another user's note, a
-- promotion never at another user's fact. An erase deletes the notes before the
-- facts (worker/store/sql/memory_api.sql).
ALTER TABLE memory_note ADD CONSTRAINT memory_note_superseded_by_fkey
    FOREIGN KEY (user_id, superseded_by) REFERENCES memory_note (user_id, id);
ALTER TABLE memory_note ADD CONSTRAINT memory_note_promoted_to_fkey
    FOREIGN KEY (user_id, promoted_to) REFERENCES memory_fact (user_id, id);

-- Where the promotion job left each user: the newest active note it had looked
-- at. A user is looked at again only once a newer note came, so a pass bounded
-- to a batch of users moves on instead of reading the same users again. One
-- small row per user, keyed by user_id (not partitioned, as user_memory_state);
-- an erase deletes it.
CREATE TABLE memory_note_check (
    user_id     text PRIMARY KEY,
    newest_note bigint      NOT NULL,
    checked_at  timestamptz NOT NULL DEFAULT now()
);
