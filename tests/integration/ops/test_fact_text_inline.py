"""0012: a fact's text and tsvector stay in its row beside a 1536-dimension embedding
(the hybrid search's word half no longer fetches them from the TOAST table)."""

from __future__ import annotations

import asyncpg

from worker.store.migrate import migrate

DIM = 1536  # the openai default: a 3 kB halfvec, over the default toast target


async def test_a_short_fact_with_a_full_size_embedding_keeps_its_text_in_the_row(
    empty_database_url: str,
) -> None:
    await migrate(empty_database_url, embed_dim=DIM)
    conn = await asyncpg.connect(empty_database_url)
    try:
        vector = "[" + ",".join(["0.25"] * DIM) + "]"
        await conn.execute(
            "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
            " embedding_model, observed_at) VALUES ('ann', 'Keeps bees in Lisbon',"
            " 'fact', 5, $1, 'm', now())", vector)
        # Facts are hash-partitioned by user (0013): the option is each partition's.
        partitions = await conn.fetch(
            "SELECT c.relname, c.reloptions, pg_relation_size(c.reltoastrelid) AS toast"
            " FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'memory_fact'::regclass")
        assert partitions
        assert all(p["toast"] == 0 for p in partitions), "text or text_search went out of line"
        assert all("toast_tuple_target=8160" in p["reloptions"] for p in partitions)
    finally:
        await conn.close()
