-- The memory model of docs/memory_model.md: scopes, valid time, lifetimes,
-- trust, per-row embedding model and dimension, imports and held proposals.
-- Every existing row stays valid: it becomes a profile fact, stated, valid
-- from when it was observed, never expiring, not pinned.

ALTER TABLE memory_fact
    -- profile: any assistant of the user may know it; relationship: it belongs to
    -- the user's relationship with one agent (persona, assistant instance).
    ADD COLUMN scope             text        NOT NULL DEFAULT 'profile',
    ADD COLUMN agent_id          text,
    -- Valid time (when the fact held in the user's world) beside transaction
    -- time (observed_at: when memfleet learned it; superseded_at: when it stopped
    -- believing it).
    ADD COLUMN valid_from        timestamptz,
    ADD COLUMN valid_to          timestamptz,
    -- From this moment reads skip the fact; the expiry pass supersedes it.
    ADD COLUMN expires_at        timestamptz,
    ADD COLUMN pinned            boolean     NOT NULL DEFAULT false,
    -- stated by the user, or inferred from what they said.
    ADD COLUMN basis             text        NOT NULL DEFAULT 'stated',
    ADD COLUMN confidence        real        NOT NULL DEFAULT 0.9,
    -- Why the row stopped being active: updated | deleted | expired | removed.
    ADD COLUMN superseded_reason text,
    -- The identity of an imported row in its source, so an import run twice adds nothing.
    ADD COLUMN import_key        text;

UPDATE memory_fact SET valid_from = observed_at;
UPDATE memory_fact SET confidence = 1.0 WHERE source_kind = 'manual';
UPDATE memory_fact
SET superseded_reason = CASE WHEN superseded_by IS NULL THEN 'deleted' ELSE 'updated' END
WHERE superseded_at IS NOT NULL;

-- Writers of the previous release name no valid_from: theirs is when they write.
ALTER TABLE memory_fact
    ALTER COLUMN valid_from SET DEFAULT now(),
    ALTER COLUMN valid_from SET NOT NULL,
    ADD CONSTRAINT memory_fact_scope_check CHECK (scope IN ('profile', 'relationship')),
    ADD CONSTRAINT memory_fact_agent_check CHECK ((scope = 'relationship') = (agent_id IS NOT NULL)),
    ADD CONSTRAINT memory_fact_valid_check CHECK (valid_to IS NULL OR valid_to >= valid_from),
    ADD CONSTRAINT memory_fact_basis_check CHECK (basis IN ('stated', 'inferred')),
    ADD CONSTRAINT memory_fact_confidence_check CHECK (confidence >= 0 AND confidence <= 1),
    ADD CONSTRAINT memory_fact_reason_check CHECK (
        superseded_reason IS NULL OR superseded_reason IN ('updated', 'deleted', 'expired', 'removed'));

ALTER TABLE memory_fact DROP CONSTRAINT memory_fact_source_kind_check;
ALTER TABLE memory_fact ADD CONSTRAINT memory_fact_source_kind_check
    CHECK (source_kind IN ('extracted', 'manual', 'backfill', 'imported'));

-- The dimension is per row, like the model: `memfleet reembed` moves a fleet to
-- another model while workers commit. Dropping the typmod rewrites nothing, but
-- resets the storage, which goes back to PLAIN (baseline.sql says why).
ALTER TABLE memory_fact ALTER COLUMN embedding TYPE halfvec;
ALTER TABLE memory_fact ALTER COLUMN embedding SET STORAGE PLAIN;
ALTER TABLE memory_fact
    ADD COLUMN embedding_dim integer GENERATED ALWAYS AS (vector_dims(embedding)) STORED;

-- The expiry pass finds due rows without scanning the active ones.
CREATE INDEX memory_fact_expiry_idx ON memory_fact (expires_at)
    WHERE superseded_at IS NULL AND expires_at IS NOT NULL;
CREATE UNIQUE INDEX memory_fact_import_key_idx ON memory_fact (user_id, import_key)
    WHERE import_key IS NOT NULL;
-- `memfleet reembed` finds the rows still on another model, user by user.
CREATE INDEX memory_fact_active_model_idx ON memory_fact (embedding_model, embedding_dim, user_id)
    WHERE superseded_at IS NULL;

-- What consolidation proposed and memfleet did not apply: a change to a pinned
-- fact (the user decides), or an inferred statement contradicting a fact the
-- user stated. Kept for the user to review; erased with the user.
CREATE TABLE memory_held_proposal (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     text        NOT NULL,
    fact_id     bigint      NOT NULL REFERENCES memory_fact (id) ON DELETE CASCADE,
    run_id      bigint,
    event       text        NOT NULL CHECK (event IN ('UPDATE', 'DELETE')),
    reason      text        NOT NULL CHECK (reason IN ('pinned', 'outranked')),
    text        text,       -- the proposed replacement; NULL for a DELETE
    session_id  text,
    proposed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_held_proposal_user_idx ON memory_held_proposal (user_id, id);

ALTER TABLE memory_run ADD COLUMN held integer NOT NULL DEFAULT 0;

-- Records kept by `memfleet reembed` so an interrupted move resumes where it stopped.
CREATE TABLE memory_reembed (
    model       text        NOT NULL,
    dim         integer     NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    moved       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (model, dim)
);
