-- Who a held addition is about (docs/persons.md, docs/memory_model.md "Undecided
-- candidates"). A candidate about one of the user's persons that consolidation
-- could not decide about was dropped, not held: an accepted addition became the
-- user's fact, and a fact about Ana must never become the user's. Now it is held
-- like any other undecided candidate and keeps its person here; accepting it
-- writes the fact about that person (worker/store/sql/corrections.sql
-- insert_addition). NULL: about the user, as every row of the previous release,
-- and every change of a fact (UPDATE, DELETE: the fact says whom it is about).
-- Of the same user by the key, as memory_fact's person (schema/0016). A merge of
-- persons moves its open proposals with its facts (worker/store/sql/persons.sql).
-- No index of its own: the foreign key's check when an erase deletes the user's
-- persons finds their proposals by the primary key's user_id (and the erase
-- deletes the proposals first), and a user's held proposals are few.
ALTER TABLE memory_held_proposal ADD COLUMN person_id bigint;
ALTER TABLE memory_held_proposal ADD CONSTRAINT memory_held_proposal_person_fkey
    FOREIGN KEY (user_id, person_id) REFERENCES memory_person (user_id, id);
