"""Every SQL statement lives in worker/store/: read from the source.

A change of the fact table (partitioning is coming) then touches the store
alone. Outside worker/store/, no module of worker/ or api_stub/:

- imports asyncpg, or worker.store.queries (the SQL files' loader);
- holds SQL in a string literal (SELECT ... FROM, SELECT 1, INSERT INTO,
  UPDATE ... SET, DELETE FROM), docstrings aside: they are prose.

Inside, two homes (docs/architecture.md, "Schema"): schema/ holds what the
database keeps (baseline.sql, the numbered changes, routines/), and
worker/store/sql/ what the store sends, with no DDL but the migrator's own
bookkeeping (migrate.sql).

Exceptions, each with its reason:

- worker/embedded/: starts and stops the embedded PostgreSQL server; it runs
  no statement on memfleet's tables (today it needs neither asyncpg nor SQL).
- tests/ and bench/ are not checked: they set up and inspect databases
  directly, by design.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHECKED = ("worker", "api_stub")
EXEMPT = ("worker/store/", "worker/embedded/")
FORBIDDEN_IMPORTS = ("asyncpg", "worker.store.queries")
SQL = re.compile(
    r"""\bSELECT\b[\s\S]*\bFROM\b
      | \bSELECT\s+(?:\d|\*|[a-z_]+\s*\()
      | \bINSERT\s+INTO\b
      | \bUPDATE\s+\w+(?:\s+AS\s+\w+)?\s+SET\b
      | \bDELETE\s+FROM\b""",
    re.IGNORECASE | re.VERBOSE,
)


def _checked_files() -> list[Path]:
    return [path for package in CHECKED for path in sorted((ROOT / package).rglob("*.py"))
            if not path.relative_to(ROOT).as_posix().startswith(EXEMPT)]


def _imports(tree: ast.AST) -> Iterator[str]:
    """Every module an import names, wherever it stands (``from a import b``: a and a.b)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes: the first expression of a module, class or function."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal but docstrings; an f-string as its literal parts
    joined (the SQL keywords are in those)."""
    skip = _docstrings(tree)
    inside_fstring: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values
                     if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            inside_fstring.update(id(v) for v in node.values)
            yield node.lineno, " ".join(parts)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skip and id(node) not in inside_fstring):
            yield node.lineno, node.value


def sql_outside_store(path: Path) -> list[str]:
    """What the file does that only worker/store/ may: each as 'line: reason'."""
    tree = ast.parse(path.read_text("utf-8"))
    found = [f"imports {name}" for name in sorted(set(_imports(tree)))
             if name in FORBIDDEN_IMPORTS or name.startswith("asyncpg.")]
    # Adjacent literals are one constant ("SELECT x" " FROM y"), so a query split over
    # lines is still seen whole.
    found += [f"line {line}: SQL in a string: {text.strip()[:60]!r}"
              for line, text in _strings(tree) if SQL.search(text)]
    return found


def test_the_check_sees_sql_and_the_imports() -> None:
    """The patterns themselves: they catch queries and leave prose alone."""
    for query in ("SELECT id FROM memory_fact", "select 1", "SELECT count(*)",
                  "INSERT INTO memory_fact (id) VALUES ($1)",
                  "UPDATE memory_fact AS f SET text = $1", "delete from memory_run"):
        assert SQL.search(query), query
    for prose in ("UPDATE", "DELETE everything it can name", "select a fact",
                  "an UPDATE rewriting someone else's fact"):
        assert not SQL.search(prose), prose


@pytest.mark.parametrize("path", _checked_files(),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_sql_outside_the_store(path: Path) -> None:
    problems = sql_outside_store(path)
    assert not problems, (
        f"{path.relative_to(ROOT)}: SQL belongs in worker/store/ (a statement in"
        f" worker/store/sql/*.sql, run by a store): {problems}")


SCHEMA_FILE = re.compile(r"^(?:baseline|\d{4}_\w+|routines/memfleet_\w+)\.sql$|^__init__\.py$")
DDL = re.compile(r"\b(?:CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:TABLE|INDEX|VIEW|FUNCTION"
                 r"|PROCEDURE|TRIGGER|TYPE|EXTENSION|SEQUENCE)\b", re.IGNORECASE)


def test_schema_holds_the_migrations_and_the_routines_alone() -> None:
    files = [p.relative_to(ROOT / "schema").as_posix() for p in (ROOT / "schema").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    assert "baseline.sql" in files
    assert [f for f in files if not SCHEMA_FILE.match(f)] == []


def test_the_store_sql_defines_no_schema_but_the_migrators_bookkeeping() -> None:
    sql_dir = ROOT / "worker" / "store" / "sql"
    found = {p.name for p in sql_dir.glob("*.sql") if DDL.search(p.read_text("utf-8"))}
    assert found == {"migrate.sql"}, "a table, index or routine belongs in schema/"
