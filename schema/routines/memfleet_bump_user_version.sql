-- The user-version compare-and-set, shared by every writer of a user's facts:
-- the pipeline's persist transaction (memfleet_commit_run) and the memory API's
-- manual writes. Returns the new version, or NULL when the version is no longer
-- p_expected (another writer changed the user's facts first).
CREATE OR REPLACE FUNCTION memfleet_bump_user_version(p_user text, p_expected bigint)
RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO user_memory_state AS s (user_id, version) VALUES (p_user, p_expected + 1)
    ON CONFLICT (user_id) DO UPDATE SET version = s.version + 1, updated_at = now()
        WHERE s.version = p_expected
    RETURNING version;
$$;
