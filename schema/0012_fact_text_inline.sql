-- A fact's text and its tsvector stay in the row beside its embedding. The
-- embedding (halfvec, storage plain) cannot leave the row, so with the default
-- toast_tuple_target (about 2 kB) every row of a 1536-dimension fact (3 kB of
-- embedding) had its text and text_search moved out of line: the hybrid search's
-- word half then fetched each from the TOAST table, twice (the match, then
-- ts_rank), about 1.5 ms of a 1,000-fact user's 3.5 ms search (docs/bench.md,
-- issue 28). A row up to a page now stays whole; a text too long to fit beside
-- its embedding still goes out of line. Rows written before this move when they
-- are rewritten (VACUUM FULL, or as facts are superseded and written anew).
ALTER TABLE memory_fact SET (toast_tuple_target = 8160);
