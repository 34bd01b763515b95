-- How a manual fact was written (docs/memory_model.md, "Where a fact comes
-- from"): through the memory API by an application ('api'), by the user on the
-- panel ('panel'), by the assistant with the memory tools ('tool'), or with the
-- memfleet CLI ('cli'). A correction is a new manual version and records its
-- own. Only manual rows carry one: extracted and imported rows are NULL, and so
-- are manual rows written before this migration (how they were written was not
-- recorded). Nothing reads it to decide anything: a manual fact is treated alike
-- whichever way it came.
ALTER TABLE memory_fact
    ADD COLUMN written_via text,
    ADD CONSTRAINT memory_fact_written_via_check
        CHECK (written_via IS NULL OR written_via IN ('api', 'panel', 'tool', 'cli'));
