"""SQL lives in worker/store/sql/*.sql; this module loads it by name."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a file of ``-- name: X`` blocks into {X: sql}."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = body.strip()
    return queries


@cache
def load(file: str) -> dict[str, str]:
    text = resources.files("worker.store").joinpath("sql", f"{file}.sql").read_text("utf-8")
    return parse_queries(text)
