-- The hand-over number of the list a session's cursor was last moved in
-- (worker.queue, worker.stages.cursor): older lists a session keeps in its
-- backlog are finished once the cursor has moved in a later one.
ALTER TABLE session_cursor ADD COLUMN handover_seq bigint NOT NULL DEFAULT 0;
