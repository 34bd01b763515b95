"""SQL lives in worker/store/sql/*.sql; this module loads it by name.

A file is a list of ``-- name: X`` blocks, one statement each. A rule that
several statements share (the fact columns, which facts a read sees, the hybrid
search) is written once, as a ``-- fragment: X(a, b)`` block of
worker/store/sql/fact_rules.sql (the one file of fragments, which holds no
statement), and a statement includes it as ``{{X($2, $3)}}``: the fragment's
``$a`` and ``$b`` become the statement's ``$2`` and ``$3``; ``$1`` is the user in
every statement, so a fragment names it as it is. A fragment may include others.
Statements are composed once, when their file is first loaded: PostgreSQL only
ever sees the composed text, so a fragment costs nothing at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_FRAGMENT = re.compile(r"^-- fragment: (\w+)(?:\(([\w, ]*)\))?\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{(\w+)(?:\(([^)]*)\))?\}\}")
_FORMAL = re.compile(r"\$([a-z_]\w*)")
_ACTUAL = re.compile(r"\$(?:\d+|[a-z_]\w*)")
FRAGMENTS = "fact_rules"


@dataclass(frozen=True)
class Fragment:
    params: tuple[str, ...]
    body: str


def parse_queries(text: str) -> dict[str, str]:
    """Split a file of ``-- name: X`` blocks into {X: sql}, as written (not composed)."""
    if _FRAGMENT.search(text):
        raise ValueError(f"fragments are written in {FRAGMENTS}.sql alone")
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = body.strip()
    return queries


def parse_fragments(text: str) -> dict[str, Fragment]:
    """Split a file of ``-- fragment: X(a, b)`` blocks into {X: Fragment}. A block's
    comment lines document it and are left out of what it inserts."""
    if _NAME.search(text):
        raise ValueError(f"{FRAGMENTS}.sql holds fragments, not statements")
    parts = _FRAGMENT.split(text)
    fragments: dict[str, Fragment] = {}
    for name, params, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        if name in fragments:
            raise ValueError(f"fragment {name!r} is defined twice")
        lines = [line for line in body.strip().splitlines()
                 if not line.lstrip().startswith("--")]
        formals = tuple(p.strip() for p in params.split(",")) if params else ()
        fragments[name] = Fragment(formals, "\n".join(lines).strip())
    return fragments


def compose(sql: str, fragments: dict[str, Fragment]) -> str:
    """``sql`` with every ``{{X(...)}}`` outside comments replaced by fragment X."""
    return _compose(sql, fragments, ())


def _compose(sql: str, fragments: dict[str, Fragment], within: tuple[str, ...]) -> str:
    out: list[str] = []
    for line in sql.splitlines():
        if line.lstrip().startswith("--"):
            out.append(line)
            continue
        out.append(_INCLUDE.sub(lambda m: _expand(m, fragments, within), line))
    return "\n".join(out)


def _expand(match: re.Match[str], fragments: dict[str, Fragment],
            within: tuple[str, ...]) -> str:
    name, args = match.group(1), match.group(2)
    if name not in fragments:
        raise ValueError(f"no fragment {name!r} in {FRAGMENTS}.sql")
    if name in within:
        raise ValueError(f"fragment {name!r} includes itself")
    fragment = fragments[name]
    actuals = tuple(a.strip() for a in args.split(",")) if args else ()
    if len(actuals) != len(fragment.params):
        raise ValueError(f"{{{{{name}}}}} takes {len(fragment.params)} parameters"
                         f" ({', '.join(fragment.params)}), given {len(actuals)}")
    if any(not _ACTUAL.fullmatch(a) for a in actuals):
        raise ValueError(f"{{{{{name}}}}}: parameters are $n, given {args!r}")
    given = dict(zip(fragment.params, actuals, strict=True))

    def actual(formal: re.Match[str]) -> str:
        if formal.group(1) not in given:
            raise ValueError(f"fragment {name!r} names ${formal.group(1)}, not a parameter")
        return given[formal.group(1)]

    body = _compose(_FORMAL.sub(actual, fragment.body), fragments, (*within, name))
    # Continuation lines line up under the include, so the composed text reads well
    # in a log or an EXPLAIN.
    return body.replace("\n", "\n" + " " * match.start())


@cache
def fragments() -> dict[str, Fragment]:
    return parse_fragments(source(FRAGMENTS))


@cache
def load(file: str) -> dict[str, str]:
    """The statements of worker/store/sql/<file>.sql by name, composed."""
    if file == FRAGMENTS:
        raise ValueError(f"{FRAGMENTS}.sql holds fragments, not statements")
    return {name: compose(sql, fragments())
            for name, sql in parse_queries(source(file)).items()}


def files() -> list[str]:
    """The names of the store's files of statements (every .sql but the fragments')."""
    names = (entry.name for entry in resources.files("worker.store").joinpath("sql").iterdir())
    return sorted(n[:-4] for n in names if n.endswith(".sql") and n[:-4] != FRAGMENTS)


def statements() -> dict[str, str]:
    """Every statement of the store, composed, as ``file.name``."""
    return {f"{file}.{name}": sql for file in files() for name, sql in load(file).items()}


def source(file: str) -> str:
    """The text of worker/store/sql/<file>.sql, as written."""
    return resources.files("worker.store").joinpath("sql", f"{file}.sql").read_text("utf-8")
