"""Each rule of the store's reads is written once (issue 39): counted in the source.

The rules: the columns of a fact, which facts a read sees (active, of the scope and
agent asked, behind the consent gate, true or believed "as of" a time) and the
hybrid search. In SQL each is a fragment of worker/store/sql/fact_rules.sql that
the statements include (worker/store/queries.py composes them); in Python each is
a function of worker/store/visibility.py that the in-memory store calls. Each
rule's distinctive text is searched for in every .sql file of worker/, api_stub/
and schema/ (SQL) or every module of the stores (Python): it must be found in its
one place, once. Before issue 39 the counts were 14 (columns), 10 (active), 8
(scope and agent), 8 (consent gate), 2 (each "as of"), 2 (hybrid search).

Not counted: Python outside the stores (worker/eval's scoring, which judges the
facts a model kept by its own reading of the memory model), and the consent of the
writes (whether memory is on for a user an import or a commit writes), which is
another rule than the read's gate.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worker.store import queries

ROOT = Path(__file__).resolve().parents[3]
SQL_ROOTS = ("worker", "api_stub", "schema")
PY_ROOTS = ("worker/store", "worker/testing")
FRAGMENTS = "worker/store/sql/fact_rules.sql"
VISIBILITY = "worker/store/visibility.py"

# rule: (the one file it is written in, its distinctive text)
SQL_RULES = {
    "fact columns": (r"confidence,\s*(?:\w+\.)?superseded_reason,\s*(?:\w+\.)?embedding_model,"
                     r"\s*(?:\w+\.)?embedding_dim"),
    "active": (r"superseded_at\s+IS\s+NULL\s+AND\s+\(\s*(?:\w+\.)?expires_at\s+IS\s+NULL"
               r"\s+OR"),
    "scope and agent": r"scope\s*=\s*'profile'\s+AND",
    "consent gate": (r"IS\s+NULL\s+OR\s+coalesce\(\s*\(SELECT\s+(?:\w+\.)?enabled\s+FROM"
                     r"\s+user_memory_consent"),
    "true as of (valid_at)": r"IS\s+DISTINCT\s+FROM\s+'removed'",
    "believed as of (known_at)": r"coalesce\(\s*(?:\w+\.)?superseded_at,\s*'infinity'\)\s*>",
    "hybrid search": r"\bts_rank\(",
}
PY_RULES = {
    "active": r"superseded_at\s+is\s+None\s+and\s+unexpired\(",
    "unexpired": r"expires_at\s+is\s+None\s+or\s+[\w.]*expires_at\s*>",
    "scope and agent": r"\.scope\s*==\s*\"profile\"",
    "consent gate": r"memory_default\s+if\s+\w+\s+is\s+None",
    "true as of (valid_at)": r"!=\s*\"removed\"",
    "believed as of (known_at)": r"superseded_at\s+is\s+None\s+or\s+[\w.]*superseded_at\s*>",
}


def places(pattern: str, roots: tuple[str, ...], suffix: str) -> dict[str, int]:
    """{file: how many times the pattern is found in it} over the roots' files."""
    found: dict[str, int] = {}
    for root in roots:
        for path in sorted((ROOT / root).rglob(f"*{suffix}")):
            count = len(re.findall(pattern, path.read_text("utf-8"), re.IGNORECASE))
            if count:
                found[path.relative_to(ROOT).as_posix()] = count
    return found


@pytest.mark.parametrize("rule", SQL_RULES)
def test_each_sql_rule_is_written_once(rule: str) -> None:
    assert places(SQL_RULES[rule], SQL_ROOTS, ".sql") == {FRAGMENTS: 1}


@pytest.mark.parametrize("rule", PY_RULES)
def test_each_python_rule_is_written_once(rule: str) -> None:
    assert places(PY_RULES[rule], PY_ROOTS, ".py") == {VISIBILITY: 1}


@pytest.mark.parametrize("rule", SQL_RULES)
def test_the_count_sees_the_rule_where_the_statements_use_it(rule: str) -> None:
    """The patterns match the text PostgreSQL runs: written out again in a statement,
    the rule would be counted."""
    uses = [name for name, sql in queries.statements().items()
            if re.search(SQL_RULES[rule], sql, re.IGNORECASE)]
    assert len(uses) >= 2, uses
