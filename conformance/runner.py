"""One run of the suite: the checks in order against one adapter, one result each,
the lines a person reads and the JSON a program reads."""

from __future__ import annotations

import asyncio
import fnmatch
import time
from dataclasses import asdict, dataclass

from conformance.adapter_process import REQUEST_TIMEOUT_S, AdapterBroken, AdapterError
from conformance.context import CheckFailed, Context
from conformance.registry import Check, all_checks
from conformance.stack import Stack

CHECK_TIMEOUT_S = 90.0  # a check whose adapter keeps answering slowly still ends


@dataclass(frozen=True, slots=True)
class Result:
    name: str
    passed: bool
    reason: str  # "" when passed
    seconds: float

    def line(self) -> str:
        return f"PASS {self.name}" if self.passed else f"FAIL {self.name}: {self.reason}"


def select(pattern: str | None) -> list[Check]:
    """The checks whose name holds ``pattern`` (or matches it as a glob)."""
    checks = all_checks()
    if not pattern:
        return checks
    return [c for c in checks if pattern in c.name or fnmatch.fnmatch(c.name, pattern)]


async def _one(ctx: Context, item: Check) -> Result:
    started = time.monotonic()
    try:
        await asyncio.wait_for(item.run(ctx), CHECK_TIMEOUT_S)
    except CheckFailed as exc:
        reason = str(exc)
    except AdapterBroken as exc:
        reason = f"adapter broke the protocol: {exc}"
    except AdapterError as exc:
        reason = f"unexpected error {exc.kind}: {exc.message}"
    except TimeoutError:
        reason = f"the check did not end within {CHECK_TIMEOUT_S:g} s"
    else:
        return Result(item.name, True, "", round(time.monotonic() - started, 3))
    return Result(item.name, False, " ".join(reason.split())[:800],
                  round(time.monotonic() - started, 3))


async def run_checks(stack: Stack, command: str, transport: str, checks: list[Check], *,
                     request_timeout_s: float = REQUEST_TIMEOUT_S) -> list[Result]:
    """Run ``checks`` against the adapter ``command`` on ``stack``; a request unanswered
    for ``request_timeout_s`` (longer for a wait) fails its check."""
    ctx = Context(stack, command, transport, request_timeout_s=request_timeout_s)
    try:
        return [await _one(ctx, item) for item in checks]
    finally:
        await ctx.close()


def summary(results: list[Result]) -> str:
    failed = sum(not r.passed for r in results)
    seconds = sum(r.seconds for r in results)
    return (f"{len(results) - failed} passed, {failed} failed of {len(results)} checks"
            f" in {seconds:.1f} s")


def as_json(command: str, transport: str, results: list[Result]) -> dict[str, object]:
    return {"adapter": command, "transport": transport,
            "passed": all(r.passed for r in results),
            "checks": [asdict(r) for r in results]}
