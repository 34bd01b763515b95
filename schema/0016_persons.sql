-- The people in a user's life (docs/persons.md): "my sister Ana", "my wife",
-- "my boss Tom". A fact is about the user (memory_fact.person_id NULL) or about
-- one of the user's persons.
--
-- Two tables, both hash-partitioned by user_id like memory_fact (schema/0013):
-- - memory_person, the person itself: who created it (a conversation or the
--   user) and, once merged into another, the link to it. Nothing else of a
--   person row ever changes; a merge sets the link and never deletes.
-- - memory_person_label, what the person is called: display name, relation to
--   the user, aliases. A rename, a new relation or a new alias is a new label
--   version superseding the old one (superseded_at, superseded_by), as facts
--   are superseded: the history is the data.
-- Facts point at the person, never at a label, so a rename moves no fact.
--
-- Only an erase deletes these rows (worker/store/sql/persons.sql erase_*).

CREATE TABLE memory_person (
    id                bigint GENERATED ALWAYS AS IDENTITY,
    user_id           text        NOT NULL,
    -- 'conversation': a worker met the person in a hand-over; 'user': made by
    -- hand (the memory API, the panel).
    created_from      text        NOT NULL,
    source_session_id text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    merged_into       bigint,
    merged_at         timestamptz,
    CONSTRAINT memory_person_pkey PRIMARY KEY (user_id, id),
    CONSTRAINT memory_person_created_from_check CHECK (created_from IN ('conversation', 'user')),
    CONSTRAINT memory_person_merged_check CHECK (
        (merged_into IS NULL) = (merged_at IS NULL) AND merged_into IS DISTINCT FROM id)
) PARTITION BY HASH (user_id);

CREATE TABLE memory_person_label (
    id             bigint GENERATED ALWAYS AS IDENTITY,
    user_id        text        NOT NULL,
    person_id      bigint      NOT NULL,
    -- NULL until a name is known ("my wife"); then the relation stands for it.
    display_name   text,
    relation       text,
    aliases        text[]      NOT NULL DEFAULT '{}',
    -- Who set this version: a worker from a conversation, the user, or a merge.
    set_by         text        NOT NULL,
    observed_at    timestamptz NOT NULL DEFAULT now(),
    superseded_at  timestamptz,
    superseded_by  bigint,
    CONSTRAINT memory_person_label_pkey PRIMARY KEY (user_id, id),
    CONSTRAINT memory_person_label_named_check CHECK (
        display_name IS NOT NULL OR relation IS NOT NULL),
    CONSTRAINT memory_person_label_set_by_check CHECK (
        set_by IN ('conversation', 'user', 'merge')),
    CONSTRAINT memory_person_label_superseded_check CHECK (
        superseded_by IS NULL OR superseded_at IS NOT NULL)
) PARTITION BY HASH (user_id);

-- The partitions: <table>_p<remainder>, as many as memory_fact's (schema/0013).
DO $$
DECLARE
    v_count integer := (SELECT value::integer FROM memfleet_setting WHERE key = 'pg_partitions');
    v_table text;
BEGIN
    IF v_count IS NULL OR v_count < 1 THEN
        RAISE EXCEPTION 'pg_partitions must be 1 or more';
    END IF;
    FOREACH v_table IN ARRAY ARRAY['memory_person', 'memory_person_label'] LOOP
        FOR v_remainder IN 0 .. v_count - 1 LOOP
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
                v_table || '_p' || v_remainder, v_table, v_count, v_remainder);
        END LOOP;
    END LOOP;
END;
$$;

-- One current label per person.
CREATE UNIQUE INDEX memory_person_label_current_idx ON memory_person_label (user_id, person_id)
    WHERE superseded_at IS NULL;

ALTER TABLE memory_person ADD CONSTRAINT memory_person_merged_into_fkey
    FOREIGN KEY (user_id, merged_into) REFERENCES memory_person (user_id, id);
ALTER TABLE memory_person_label ADD CONSTRAINT memory_person_label_person_fkey
    FOREIGN KEY (user_id, person_id) REFERENCES memory_person (user_id, id);
ALTER TABLE memory_person_label ADD CONSTRAINT memory_person_label_superseded_by_fkey
    FOREIGN KEY (user_id, superseded_by) REFERENCES memory_person_label (user_id, id);

-- Who a fact is about: NULL, the user (every row of the previous release); else
-- one of the user's persons, of the same user by the key.
ALTER TABLE memory_fact ADD COLUMN person_id bigint;
ALTER TABLE memory_fact ADD CONSTRAINT memory_fact_person_fkey
    FOREIGN KEY (user_id, person_id) REFERENCES memory_person (user_id, id);
-- A person's facts, and the foreign key's checks when an erase deletes persons.
CREATE INDEX memory_fact_person_idx ON memory_fact (user_id, person_id)
    WHERE person_id IS NOT NULL;
