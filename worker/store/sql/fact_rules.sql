-- The rules the store's statements on facts share, each written here once:
-- which columns make a fact, which facts a read sees, the hybrid search.
-- worker/store/queries.py composes them into the statements of the other files,
-- which include one as {{name($2, $3)}} (its $scope, $agent... become the
-- statement's $2, $3...). $1 is the user in every statement, so it is named as
-- it is. Columns are unqualified: where a rule stands, memory_fact is the only
-- table in reach with those columns (PostgreSQL refuses an ambiguous column, so
-- a slip fails loudly, never reads another table's column). A predicate is
-- parenthesised whole, so it stands anywhere an expression does.
--
-- worker/store/visibility.py says the visibility rules in Python, for the
-- in-memory store (worker/testing): each fragment below names its function
-- there, and tests/contract/test_store_visibility.py holds the two together.
-- tests/unit/store/test_sql_rules_once.py counts the places each is written.

-- fragment: fact_columns
-- What a read returns of a fact: worker.store.types.FactRecord, field by field
-- (worker.store.versioned.fact_of reads the row by these names).
id, user_id, text, category, importance, observed_at, source_session_id, source_kind,
superseded_at, superseded_by, created_at, scope, agent_id, valid_from, valid_to,
expires_at, pinned, basis, confidence, superseded_reason, embedding_model, embedding_dim,
written_via, person_id

-- fragment: active
-- Not superseded, and not expired even before the expiry pass supersedes it
-- (visibility.active).
(superseded_at IS NULL AND (expires_at IS NULL OR expires_at > now()))

-- fragment: in_scope(scope, agent)
-- The user's own facts (a fact about one of their persons is never the user's:
-- docs/persons.md) of the scope asked ($scope: none | profile | relationship |
-- both | all) and the agent ($agent): profile rows for profile and both,
-- relationship rows of that agent alone for relationship and both (none without
-- an agent), every row about the user for all; none for none (visibility.in_scope).
(person_id IS NULL
 AND ($scope::text = 'all' OR (scope = 'profile' AND $scope::text IN ('profile', 'both'))
      OR (scope = 'relationship' AND agent_id = $agent::text
          AND $scope::text IN ('relationship', 'both'))))

-- fragment: consent_gate(gate)
-- worker.store.types.ConsentGate ($gate): NULL reads regardless of consent (the
-- user's own view); true or false (the fleet's default, for a user who never
-- chose) finds no row while the user's memory is off, read in the same
-- statement, so a switch never meets a read half way (visibility.consent_open).
($gate::boolean IS NULL
 OR coalesce((SELECT c.enabled FROM user_memory_consent AS c WHERE c.user_id = $1), $gate))

-- fragment: as_of(valid_at, known_at)
-- The two "as of" reads of docs/memory_model.md, one time given, the other NULL.
-- valid_at: true then by what memfleet knows now. An expiry ends the validity
-- where the expiry pass will, so the answer does not wait for it; a removed row
-- was never true (visibility.true_at).
-- known_at: believed then: observed by then, not yet superseded, and not
-- expired (a read then skipped it, whenever the expiry pass ran)
-- (visibility.believed_at).
(($valid_at::timestamptz IS NULL
  OR (valid_from <= $valid_at AND coalesce(valid_to, expires_at, 'infinity') > $valid_at
      AND superseded_reason IS DISTINCT FROM 'removed'))
 AND ($known_at::timestamptz IS NULL
      OR (observed_at <= $known_at AND coalesce(superseded_at, 'infinity') > $known_at
          AND coalesce(expires_at, 'infinity') > $known_at)))

-- fragment: visible(scope, agent, gate)
-- What a read of the user's facts now returns (visibility.visible, with
-- visibility.consent_open).
({{active}}
 AND {{in_scope($scope, $agent)}}
 AND {{consent_gate($gate)}})

-- fragment: visible_as_of(scope, agent, valid_at, known_at, gate)
-- What an "as of" read returns, superseded rows included (visibility.visible with
-- a time, with visibility.consent_open).
({{in_scope($scope, $agent)}}
 AND {{as_of($valid_at, $known_at)}}
 AND {{consent_gate($gate)}})

-- fragment: hybrid_search(embedding, words, k, dim)
-- The rest of a statement that starts WITH visible AS NOT MATERIALIZED (SELECT
-- id, embedding, embedding_dim, text_search FROM memory_fact WHERE user_id = $1
-- AND the rows the read sees): in one statement, one snapshot, the top-$k of
-- those rows by meaning and by words (ranked_lists), each with its rank, fused
-- by RRF in Python (worker/read_search.py). The in-memory store's search says the same
-- (worker/testing/in_memory_store.py).
{{ranked_lists($embedding, $words, $k, $dim)}}
SELECT {{fact_columns}},
       s.rank AS semantic_rank, l.rank AS lexical_rank
FROM memory_fact AS f
LEFT JOIN semantic AS s ON s.fact_id = f.id
LEFT JOIN lexical AS l ON l.fact_id = f.id
WHERE f.user_id = $1 AND f.id IN (SELECT fact_id FROM semantic UNION SELECT fact_id FROM lexical)

-- fragment: ranked_lists(embedding, words, k, dim)
-- The two ranked lists of a hybrid search, as CTEs `semantic` and `lexical`
-- (fact_id, rank) over the rows of a CTE `visible` (id, embedding,
-- embedding_dim, text_search) the statement defines before them: the top-$k by
-- meaning (exact halfvec cosine scan of $embedding, as in the neighbour query)
-- and by words (ts_rank over the 'simple' tsvector; $words is a
-- websearch_to_tsquery string of the query's words joined by " or "). Meaning
-- ranks only rows of the query's dimension ($dim): while a re-embed moves the
-- user, the others cannot be compared. The facts' search (hybrid_search) and the
-- notes' (notes.sql search_notes, whose `fact_id` is a note's id) share it.
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

-- fragment: note_columns
-- What a read returns of a note (worker.store.note_types.NoteRecord, field by
-- field); memory_note is the table in reach where it stands.
id, user_id, text, observed_at, source_session_id, created_at, superseded_at, superseded_by,
superseded_reason, promoted_to, embedding_model, embedding_dim
