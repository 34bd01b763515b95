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
