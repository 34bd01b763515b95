-- The rules the store's statements on facts share, each written here once.
-- worker/store/queries.py composes them into the statements of the other files,
-- which include one as {{name($2, $3)}} (its named parameters become the
-- statement's $2, $3...). $1 is the user in every statement, so it is named as
-- it is. Columns are unqualified: where a rule stands, memory_fact is the only
-- table in reach with those columns (PostgreSQL refuses an ambiguous column, so
-- a slip fails loudly, never reads another table's column).

-- fragment: fact_columns
-- What a read returns of a fact: worker.store.types.FactRecord, field by field
-- (worker.store.versioned.fact_of reads the row by these names).
id, user_id, text, category, importance, observed_at, source_session_id, source_kind,
superseded_at, superseded_by, created_at, scope, agent_id, valid_from, valid_to,
expires_at, pinned, basis, confidence, superseded_reason, embedding_model, embedding_dim

-- fragment: hybrid_search(embedding, words, k, dim)
-- The rest of a statement that starts WITH visible AS NOT MATERIALIZED (SELECT
-- id, embedding, embedding_dim, text_search FROM memory_fact WHERE user_id = $1
-- AND the rows the read sees): in one statement, one snapshot, the top-$k of
-- those rows by meaning (exact halfvec cosine scan of $embedding, as in the
-- neighbour query) and by words (ts_rank over the 'simple' tsvector; $words is
-- a websearch_to_tsquery string of the query's words joined by " or "), each
-- with its rank, fused by RRF in Python (worker/read.py). Meaning ranks only
-- rows of the query's dimension ($dim): while a re-embed moves the user, the
-- others cannot be compared. The in-memory store's search says the same
-- (worker/testing/in_memory_store.py).
semantic (fact_id, rank) AS (
    SELECT id, row_number() OVER (ORDER BY distance, id)
    FROM (
        SELECT id, embedding <=> $embedding AS distance
        FROM visible
        WHERE embedding_dim = $dim
        ORDER BY embedding <=> $embedding, id
        LIMIT $k
    ) AS s
),
lexical (fact_id, rank) AS (
    SELECT id, row_number() OVER (ORDER BY score DESC, id)
    FROM (
        SELECT v.id, ts_rank(v.text_search, q.query) AS score
        FROM visible AS v, websearch_to_tsquery('simple', $words) AS q (query)
        WHERE v.text_search @@ q.query
        ORDER BY score DESC, v.id
        LIMIT $k
    ) AS l
)
SELECT {{fact_columns}},
       s.rank AS semantic_rank, l.rank AS lexical_rank
FROM memory_fact AS f
LEFT JOIN semantic AS s ON s.fact_id = f.id
LEFT JOIN lexical AS l ON l.fact_id = f.id
WHERE f.user_id = $1 AND f.id IN (SELECT fact_id FROM semantic UNION SELECT fact_id FROM lexical)
