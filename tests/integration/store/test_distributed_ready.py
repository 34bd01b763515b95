"""What a user-sharded PostgreSQL (Citus distributing by user_id) needs of the schema
and of every statement (docs/capacity.md, "Running on a distributed PostgreSQL").

The schema: the catalog of a database migrated from the real schema/ files (the
end state of baseline + every migration, which no single file states). Every
table is a per-user table (distributed by user_id), a global one (a reference
or coordinator table, listed with why), or listed as not ready yet; a new
table that is none of these fails. A per-user table has user_id NOT NULL in its
primary key and in every unique index, and a foreign key between two of them
carries user_id on both sides.

The SQL: every statement of worker/store/sql/*.sql and every statement in the
bodies of schema/routines/*.sql, read as text. Each reference to a per-user
table must be pinned to one user: ``<alias>.user_id = $n`` (or the routine's
v_user / p_user) for a read, update or delete, and user_id given as one
parameter for an insert. Statements meant to span users are in OPERATOR.
Nothing here ran on Citus: it is not on this machine.
"""

from __future__ import annotations

import re

import asyncpg

from worker.store import queries
from worker.store.migrate import default_schema_dir

ROUTINES_DIR = default_schema_dir() / "routines"

PER_USER = ("memory_fact", "memory_held_proposal", "session_cursor", "user_memory_state",
            "user_memory_consent", "memory_person", "memory_person_label", "memory_portrait",
            "user_portrait_choice", "memory_note", "memory_note_check")
# Keyed by user, not ready to be distributed by it.
NOT_YET = {
    "memory_run": "a run that fails before it knows its user, or whose user is erased"
                  " meanwhile, keeps its audit row with user_id NULL (schema/0008), and a"
                  " distributed table takes no NULL distribution value",
}
GLOBAL = {
    "memfleet_setting": "the fleet's settings (embedding model and dimension, partitions)",
    "memfleet_migration": "migration bookkeeping, on the coordinator (`memfleet migrate`)",
    "memfleet_routine": "routine bookkeeping, on the coordinator (`memfleet migrate`)",
    "service_key": "chat servers' credentials: a key acts for all its users, no user_id",
    "memory_reembed": "`memfleet reembed`'s moves: one per model, for the whole fleet",
    "memory_erasure_fence": "keyed by an HMAC of the user id, never the id (so no id"
                            " outlives an erase): it cannot be co-located by user_id; a few"
                            " rows, pruned after a hand-over's lifetime",
    "memory_erasure_fence_key": "one row: the check value of the fence key",
    "memory_erasure": "the erase record, without personal data and without a user",
}
# Statements that span users on purpose, and why.
OPERATOR = {
    "expiry.lock_due_users": "the expiry pass finds the users with due facts",
    "expiry.expire_due": "the expiry pass supersedes due facts of the users it locked",
    "reembed.users_left": "memfleet reembed finds the users still on the old model",
    "reembed.verify": "memfleet reembed counts every active row at the end of a move",
    "importer.known_keys": "memfleet import: one lookup for a batch of many users' lines",
    "importer.imported_blobs": "memfleet import: a batch of many users' legacy blobs",
    "importer.active_texts": "memfleet import: the active texts of the batch's users",
    "importer.user_gates": "memfleet import: consent and fences of the batch's users",
    "facts.dead_letters": "memfleet runs / retry: dead letters over every session",
    "note_promotion.users_to_check": "the notes' promotion job finds the users with new notes",
    "routines/memfleet_insert_run#2": "memory_run's insert keeps no user for an erased"
                                      " user's run (NOT_YET)",
}

USER_VALUE = r"(\$\d+|v_user|p_user)"
KEYWORDS = {"where", "set", "on", "left", "join", "inner", "cross", "using", "group", "order",
            "limit", "for", "returning", "values", "select", "union", "overriding", "as"}
REFERENCE = re.compile(r"\b(from|join|update|into)\s+(" + "|".join(PER_USER + tuple(NOT_YET))
                       + r")\b(?:\s+as)?(?:\s+(\w+))?", re.IGNORECASE)


def _strip(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def _top_level(items: str) -> list[str]:
    """``items`` split at commas outside parentheses."""
    out, depth, current = [], 0, ""
    for char in items:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += char
    return [*out, current.strip()]


def _balanced(text: str, start: int) -> str:
    """The text inside the parentheses opening at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    raise ValueError("unbalanced parentheses")


def _insert_pinned(sql: str, end: int) -> bool:
    """The INSERT at ``end`` (after its table and alias) names user_id, given one user."""
    rest = sql[end:]
    columns = [c.strip().lower() for c in _balanced(rest, rest.index("(")).split(",")]
    if "user_id" not in columns:
        return False
    after = rest[rest.index("(") + len(_balanced(rest, rest.index("("))) + 2:]
    values = re.match(r"\s*(overriding system value\s*)?(values\s*\(|select\s)", after,
                      re.IGNORECASE)
    if values is None:
        return False
    if values[2].lower().startswith("values"):
        items = _top_level(_balanced(after, values.end() - 1))
    else:
        items = _top_level(re.split(r"\bfrom\b", after[values.end():], maxsplit=1,
                                    flags=re.IGNORECASE)[0])
    return bool(re.fullmatch(USER_VALUE, items[columns.index("user_id")]))


def unpinned(sql: str) -> list[str]:
    """The per-user table references of ``sql`` that no user predicate pins."""
    text = _strip(sql)
    missing = []
    for ref in REFERENCE.finditer(text):
        kind, table, alias = ref[1].lower(), ref[2], (ref[3] or "").lower()
        if alias in KEYWORDS:
            alias = ""
        if kind == "into":
            end = ref.end() if alias else ref.end(2)
            if not _insert_pinned(text, end):
                missing.append(f"INSERT INTO {table}")
            continue
        if alias:
            pinned = re.search(rf"\b{alias}\.user_id\s*=\s*{USER_VALUE}", text, re.IGNORECASE)
        else:
            pinned = re.search(rf"(?<![\w.])user_id\s*=\s*{USER_VALUE}", text, re.IGNORECASE)
        if not pinned:
            missing.append(f"{table} {alias}".strip())
    return missing


def statements() -> dict[str, str]:
    """Every statement: ``file.name`` for the store's queries, ``routines/name#n`` for
    the n-th statement of a routine file's function bodies."""
    found = queries.statements()  # composed with fact_rules.sql, as the store runs them
    for path in sorted(ROUTINES_DIR.glob("*.sql")):
        bodies = re.findall(r"\$\$(.*?)\$\$", _strip(path.read_text("utf-8")), re.DOTALL)
        chunks = [c for body in bodies for c in body.split(";") if c.strip()]
        for n, chunk in enumerate(chunks, 1):
            found[f"routines/{path.stem}#{n}"] = chunk
    return found


def test_every_statement_on_a_per_user_table_names_one_user() -> None:
    found = statements()
    assert set(OPERATOR) <= set(found), "OPERATOR names a statement that is gone"
    assert any(name.startswith("routines/memfleet_commit_run#") for name in found)
    touching = {name for name, sql in found.items() if REFERENCE.search(_strip(sql))}
    assert len(touching) >= 60, sorted(touching)
    unscoped = {name: missing for name, sql in found.items()
                if name not in OPERATOR and (missing := unpinned(sql))}
    assert not unscoped, (
        f"statements on per-user tables without one user: {unscoped};"
        " add user_id = $n, or list the statement in OPERATOR with why")


def test_the_check_finds_a_statement_without_its_user() -> None:
    assert unpinned("SELECT f.text FROM memory_fact AS f WHERE f.user_id = $1 AND f.id = $2") == []
    assert unpinned("SELECT f.text FROM memory_fact AS f WHERE f.id = $2") == ["memory_fact f"]
    assert unpinned("UPDATE memory_fact SET pinned = true WHERE id = $2") == ["memory_fact"]
    # One table pinned, the other joined by id alone.
    assert unpinned("SELECT 1 FROM memory_held_proposal AS p JOIN memory_fact AS f"
                    " ON f.id = p.fact_id WHERE p.user_id = $1") == ["memory_fact f"]
    assert unpinned("INSERT INTO memory_fact (user_id, text) VALUES ($1, $2)") == []
    assert unpinned("INSERT INTO memory_fact (text, user_id) VALUES ($1, lower($2))") == [
        "INSERT INTO memory_fact"]
    assert unpinned("INSERT INTO memory_fact (text, user_id) SELECT t, v_user FROM x") == []


async def test_every_table_is_keyed_by_user_or_listed_as_global(db: asyncpg.Connection) -> None:
    tables = {r["relname"] for r in await db.fetch(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        " AND relkind IN ('r', 'p') AND NOT relispartition")}
    listed = set(PER_USER) | set(NOT_YET) | set(GLOBAL)
    assert tables == listed, (
        f"tables neither per-user nor global: {sorted(tables - listed)};"
        f" listed but gone: {sorted(listed - tables)}")
    nullable = await db.fetch(
        "SELECT attrelid::regclass::text AS t FROM pg_attribute"
        " WHERE attname = 'user_id' AND NOT attnotnull AND attrelid = ANY($1::regclass[])",
        list(PER_USER))
    assert not nullable, nullable
    # Every primary key and unique index of a per-user table includes user_id.
    unique = await db.fetch(
        "SELECT i.indrelid::regclass::text AS t, i.indexrelid::regclass::text AS index,"
        " i.indisprimary AS primary,"
        " EXISTS (SELECT 1 FROM pg_attribute AS a WHERE a.attrelid = i.indrelid"
        "         AND a.attnum = ANY(i.indkey) AND a.attname = 'user_id') AS has_user"
        " FROM pg_index AS i WHERE i.indisunique AND i.indrelid = ANY($1::regclass[])",
        list(PER_USER))
    assert {r["t"] for r in unique if r["primary"]} == set(PER_USER)
    assert [r["index"] for r in unique if not r["has_user"]] == []
    # Foreign keys between per-user tables pair user_id with user_id.
    keys = await db.fetch(
        "SELECT conname, conrelid::regclass::text AS t, confrelid::regclass::text AS ref,"
        " ARRAY(SELECT attname FROM unnest(conkey) WITH ORDINALITY AS k (n, o)"
        "       JOIN pg_attribute ON attrelid = conrelid AND attnum = k.n ORDER BY k.o) AS cols,"
        " ARRAY(SELECT attname FROM unnest(confkey) WITH ORDINALITY AS k (n, o)"
        "       JOIN pg_attribute ON attrelid = confrelid AND attnum = k.n ORDER BY k.o)"
        "   AS ref_cols"
        " FROM pg_constraint WHERE contype = 'f' AND conparentid = 0"
        " AND connamespace = 'public'::regnamespace")
    assert len(keys) >= 3, keys
    for key in keys:
        assert key["t"] in PER_USER and key["ref"] in PER_USER, dict(key)
        assert "user_id" in key["cols"], dict(key)
        position = key["cols"].index("user_id")
        assert key["ref_cols"][position] == "user_id", dict(key)
