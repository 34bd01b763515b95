-- A candidate fact that consolidation could not decide about is held for the
-- user as an addition (docs/memory_model.md, "Undecided candidates"): the model's
-- decisions for it stayed unusable after the re-ask (a target it was not shown,
-- no decision at all, or no usable answer), so neither adding it (a duplicate or
-- a contradiction, if it was meant to replace a neighbour) nor dropping it is
-- safe. Such a proposal has no fact it was held against (fact_id NULL, event
-- 'ADD', reason 'undecided') and keeps what an accept needs to write the fact:
-- its category, importance, scope and agent. Rows of the previous release are
-- untouched: every one of them is an UPDATE or DELETE of a fact.
ALTER TABLE memory_held_proposal
    ALTER COLUMN fact_id DROP NOT NULL,
    ADD COLUMN category   text,
    ADD COLUMN importance smallint,
    ADD COLUMN scope      text,
    ADD COLUMN agent_id   text,
    DROP CONSTRAINT memory_held_proposal_event_check,
    DROP CONSTRAINT memory_held_proposal_reason_check,
    ADD CONSTRAINT memory_held_proposal_event_check
        CHECK (event IN ('ADD', 'UPDATE', 'DELETE')),
    ADD CONSTRAINT memory_held_proposal_reason_check
        CHECK (reason IN ('pinned', 'outranked', 'undecided')),
    -- An addition names no fact and carries its own; a change names its fact.
    ADD CONSTRAINT memory_held_proposal_addition_check CHECK (
        (event = 'ADD') = (fact_id IS NULL)
        AND (event <> 'ADD' OR (text IS NOT NULL AND category IS NOT NULL
                                AND importance IS NOT NULL AND scope IS NOT NULL)));
