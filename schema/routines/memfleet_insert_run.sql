-- A run's audit row, from the JSON of worker.store.types.RunRecord (every
-- column but id and finished_at). Used on its own (runs that move no cursor)
-- and inside memfleet_commit_run.
CREATE OR REPLACE FUNCTION memfleet_insert_run(p_run jsonb)
RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO memory_run (job_id, job_try, session_id, user_id, outcome, error,
                            slice_first_hash, slice_last_hash, slice_len, candidates,
                            added, updated, deleted, unchanged, rejected,
                            consolidation_attempts, input_tokens, output_tokens,
                            timings_ms, started_at)
    SELECT r.job_id, r.job_try, r.session_id, r.user_id, r.outcome, r.error,
           r.slice_first_hash, r.slice_last_hash, r.slice_len, r.candidates,
           r.added, r.updated, r.deleted, r.unchanged, r.rejected,
           r.consolidation_attempts, r.input_tokens, r.output_tokens,
           r.timings_ms, r.started_at
    FROM jsonb_populate_record(NULL::memory_run, p_run) AS r
    RETURNING id;
$$;
