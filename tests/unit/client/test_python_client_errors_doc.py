"""docs/python_client.md's error table names every error class a memory API call
can raise: the HTTP-only ones (MemoryApiError and below), the hand-over's, and
ConfigurationError; each is importable from worker.client."""

from __future__ import annotations

import re
from pathlib import Path

import worker.client
from worker import errors

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "python_client.md"


def subclasses(cls: type[Exception]) -> set[type[Exception]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= subclasses(sub)
    return found


def test_the_error_table_names_every_class_a_call_raises() -> None:
    text = GUIDE.read_text("utf-8")
    table = text[text.index("## Errors"):text.index("## Tests")]
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", table))
    raised = {errors.MemoryApiError, *subclasses(errors.MemoryApiError),
              errors.InvalidHandover, *subclasses(errors.InvalidHandover),
              errors.HandoverUnavailable, *subclasses(errors.HandoverUnavailable)}
    assert {cls.__name__ for cls in raised} | {"ConfigurationError"} <= named
    for cls in raised:
        assert getattr(worker.client, cls.__name__) is cls, cls.__name__
