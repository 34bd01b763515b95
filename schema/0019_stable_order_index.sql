-- The prompt split's stable block (worker/read_split.py, docs/prompt.md) reads a
-- user's first active facts in the order pinned, importance (highest first), id:
-- with this index that is a short walk of the user's entries, not a sort of all
-- their active rows (issue 41: bench.prompt_split). Partial on the active rows, as
-- memory_fact_active_user_idx; on the partitioned table, so each partition has its
-- own. Built in the migration's transaction: writes to memory_fact wait for it.
CREATE INDEX memory_fact_stable_order_idx
    ON memory_fact (user_id, pinned DESC, importance DESC, id)
    WHERE superseded_at IS NULL;
