-- The user's answer to a held proposal (docs/memory_model.md, "The user's
-- corrections"): accepted (the change was applied) or dismissed, when, and by
-- whom: 'user' (the user's own token) or 'key:<service key id>' (a chat
-- server's admin key). An open proposal has none of the three. Nothing is
-- deleted: the answered proposal is the audit trail, and it goes with the user.
ALTER TABLE memory_held_proposal
    ADD COLUMN resolution     text CHECK (resolution IN ('accepted', 'dismissed')),
    ADD COLUMN resolved_at    timestamptz,
    ADD COLUMN resolved_by    text,
    -- An accepted UPDATE: the version it wrote.
    ADD COLUMN result_fact_id bigint REFERENCES memory_fact (id) ON DELETE SET NULL,
    ADD CONSTRAINT memory_held_proposal_resolved_check CHECK (
        (resolution IS NULL) = (resolved_at IS NULL)
        AND (resolution IS NULL) = (resolved_by IS NULL)
        AND (result_fact_id IS NULL OR resolution = 'accepted'));
