"""The store's SQL loader (worker/store/queries.py): named statements, and the
fragments of fact_rules.sql composed into them when a file is loaded."""

from __future__ import annotations

import re

import pytest

from worker.store import queries
from worker.store.queries import Fragment, compose, parse_fragments, parse_queries

RULES = """
-- Header prose, not a fragment.

-- fragment: columns
-- What a row is (documentation: left out of the text).
id, text

-- fragment: mine(agent)
(user_id = $1 AND agent_id = $agent::text)

-- fragment: both(scope, agent)
($scope::text = 'all'
 OR {{mine($agent)}})
"""


def test_a_fragment_takes_its_parameters_and_leaves_its_comments_out() -> None:
    fragments = parse_fragments(RULES)
    assert fragments == {
        "columns": Fragment((), "id, text"),
        "mine": Fragment(("agent",), "(user_id = $1 AND agent_id = $agent::text)"),
        "both": Fragment(("scope", "agent"), "($scope::text = 'all'\n OR {{mine($agent)}})"),
    }
    sql = "SELECT {{columns}}\nFROM memory_fact\nWHERE user_id = $1 AND {{both($6, $7)}};"
    assert compose(sql, fragments) == (
        "SELECT id, text\nFROM memory_fact\n"
        "WHERE user_id = $1 AND ($6::text = 'all'\n"
        "                        OR (user_id = $1 AND agent_id = $7::text));")


def test_an_include_in_a_comment_stays_as_written() -> None:
    sql = "-- see {{columns}}\nSELECT 1;"
    assert compose(sql, parse_fragments(RULES)) == sql


@pytest.mark.parametrize(("sql", "error"), [
    ("SELECT {{nothing}}", "no fragment 'nothing'"),
    ("SELECT {{mine}}", "takes 1 parameters"),
    ("SELECT {{mine($2, $3)}}", "takes 1 parameters"),
    ("SELECT {{mine(agent_id)}}", "parameters are \\$n"),
])
def test_a_wrong_include_fails_when_the_file_loads(sql: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        compose(sql, parse_fragments(RULES))


def test_a_fragment_names_only_its_parameters_and_never_itself() -> None:
    with pytest.raises(ValueError, match=r"names \$agent, not a parameter"):
        compose("{{bad}}", parse_fragments("-- fragment: bad\nagent_id = $agent"))
    with pytest.raises(ValueError, match="includes itself"):
        compose("{{loop}}", parse_fragments("-- fragment: loop\n({{loop}})"))


def test_fragments_live_in_fact_rules_alone_and_statements_outside_it() -> None:
    with pytest.raises(ValueError, match=r"fact_rules\.sql alone"):
        parse_queries("-- name: a\nSELECT 1;\n-- fragment: b\n1")
    with pytest.raises(ValueError, match="not statements"):
        parse_fragments("-- fragment: b\n1\n-- name: a\nSELECT 1;")
    with pytest.raises(ValueError, match="defined twice"):
        parse_fragments("-- fragment: b\n1\n-- fragment: b\n2")
    with pytest.raises(ValueError, match="not statements"):
        queries.load(queries.FRAGMENTS)


def test_every_statement_of_the_store_composes_whole() -> None:
    """Every include resolves, every fragment parameter is replaced, and every fragment
    of fact_rules.sql is used by some statement."""
    statements = queries.statements()
    assert "memory_api.search" in statements and queries.FRAGMENTS not in queries.files()
    for name, sql in statements.items():
        code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
        assert "{{" not in code and "}}" not in code, name
        assert not re.search(r"\$[a-z_]", code), name
    raw = "\n".join(sql for file in queries.files()
                    for sql in parse_queries(queries.source(file)).values())
    used = set(re.findall(r"\{\{(\w+)", raw))
    for fragment in queries.fragments().values():
        used |= set(re.findall(r"\{\{(\w+)", fragment.body))
    assert used == set(queries.fragments()), "a fragment no statement uses"
