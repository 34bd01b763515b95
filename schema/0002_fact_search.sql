-- Word search over facts for the memory API's hybrid search (RRF of meaning and
-- words). 'simple' config: no stemming and no stop words, so names, tools and
-- places match as written whatever the language of the conversation.
-- IF NOT EXISTS: applied once by `memfleet migrate`, but harmless if re-run by hand.

ALTER TABLE memory_fact
    ADD COLUMN IF NOT EXISTS text_search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED;

-- Only active facts are searched; superseded rows need no entry.
CREATE INDEX IF NOT EXISTS memory_fact_text_search_idx
    ON memory_fact USING gin (text_search) WHERE superseded_at IS NULL;
