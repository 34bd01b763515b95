-- Sessions are identified by (user_id, session_id): chat products number
-- sessions per user, so two users may both hand over session "1". Every
-- cursor row already carries its user, so the new key keeps them all.
ALTER TABLE session_cursor DROP CONSTRAINT session_cursor_pkey;
ALTER TABLE session_cursor ADD PRIMARY KEY (user_id, session_id);

-- A run's rows of one user, for the right of access and the erase; runs
-- recorded before a user id was known are found by session (memory_run_session_idx).
CREATE INDEX memory_run_user_idx ON memory_run (user_id, id);

-- Consent: whether memfleet remembers the user. No row: the fleet's default
-- (MEMFLEET_MEMORY_DEFAULT). A user who opted out keeps a row through an
-- erase, so that forgetting does not quietly turn memory back on.
CREATE TABLE user_memory_consent (
    user_id    text PRIMARY KEY,
    enabled    boolean     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The erase fence (worker.store, memfleet_commit_run): a commit of a
-- hand-over numbered at or below erased_seq (the Redis clock when the erase
-- cleared the user's hand-overs) started before the erase and writes nothing.
-- Keyed by sha256 of the user id and pruned once no job can still hold such a
-- hand-over (its payload lifetime), so no user id outlives the erase.
CREATE TABLE memory_erasure_fence (
    user_key   bytea       PRIMARY KEY,
    erased_seq bigint      NOT NULL,
    erased_at  timestamptz NOT NULL DEFAULT now()
);

-- Every erase, on the record without personal data: when, and how many rows
-- of each kind went.
CREATE TABLE memory_erasure (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    erased_at timestamptz NOT NULL DEFAULT now(),
    removed   jsonb       NOT NULL
);
