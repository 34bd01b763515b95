"""The checks, in the order they run: each a small async function of a Context,
named by what it checks, with the promise and its section of docs/protocol.md in its
docstring. It passes by returning and fails by raising (CheckFailed, or the
adapter's AdapterBroken / an unexpected AdapterError)."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from conformance.context import Context

CHECK_MODULES = ("conformance.checks_payload", "conformance.checks_lists",
                 "conformance.checks_limits", "conformance.checks_progress")

CheckFn = Callable[[Context], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    run: CheckFn
    promise: str  # the docstring's first paragraph

    @property
    def doc(self) -> str:
        return (self.run.__doc__ or "").strip()


CHECKS: list[Check] = []


def check(name: str) -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        if any(c.name == name for c in CHECKS):
            raise ValueError(f"two checks named {name}")
        doc = (fn.__doc__ or name).strip()
        promise = " ".join(doc.split("\n\n")[0].split())  # the first paragraph
        CHECKS.append(Check(name, fn, promise))
        return fn
    return register


def all_checks() -> list[Check]:
    """Every check, importing the modules that define them."""
    for module in CHECK_MODULES:  # their @check registrations, in this order
        importlib.import_module(module)
    return list(CHECKS)
