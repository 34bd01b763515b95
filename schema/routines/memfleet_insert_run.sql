-- A run's audit row, from the JSON of worker.store.types.RunRecord (every
-- column but id and finished_at). Used on its own (runs that move no cursor)
-- and inside memfleet_commit_run. The row of a run whose hand-over (the JSON's
-- handover_seq, not a column) an erase of its user cleared keeps neither the
-- user id nor the session id: what an erase removed is not written back. The
-- JSON's fence_key (hex, not a column: worker.store.fence_key) finds the user's
-- fence; a row with a user and no fence_key (a caller of an older release)
-- keeps no ids either, as no fence could be checked for it.
-- The user's advisory lock (shared; an erase takes it exclusive) keeps an
-- erase from deleting the user's rows while this row is being written unseen.
CREATE OR REPLACE FUNCTION memfleet_insert_run(p_run jsonb)
RETURNS bigint
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock_shared(hashtextextended('memfleet:user:' || (p_run ->> 'user_id'), 0))
    WHERE p_run ->> 'user_id' IS NOT NULL;
    INSERT INTO memory_run (job_id, job_try, session_id, user_id, outcome, error,
                            slice_first_hash, slice_last_hash, slice_len, candidates,
                            added, updated, deleted, unchanged, rejected,
                            consolidation_attempts, held, input_tokens, output_tokens,
                            timings_ms, started_at)
    SELECT r.job_id, r.job_try,
           CASE WHEN erased THEN NULL ELSE r.session_id END,
           CASE WHEN erased THEN NULL ELSE r.user_id END, r.outcome, r.error,
           r.slice_first_hash, r.slice_last_hash, r.slice_len, r.candidates,
           r.added, r.updated, r.deleted, r.unchanged, r.rejected,
           r.consolidation_attempts, coalesce(r.held, 0), r.input_tokens, r.output_tokens,
           r.timings_ms, r.started_at
    FROM jsonb_populate_record(NULL::memory_run, p_run) AS r,
         LATERAL (SELECT EXISTS (
             SELECT 1 FROM memory_erasure_fence
             WHERE r.user_id IS NOT NULL
               AND user_key = decode(p_run ->> 'fence_key', 'hex')
               AND erased_seq >= coalesce((p_run ->> 'handover_seq')::bigint, 0))
             OR (r.user_id IS NOT NULL AND p_run ->> 'fence_key' IS NULL) AS erased
         ) AS fence
    RETURNING id;
$$;
