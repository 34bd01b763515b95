"""CPU work on user text, off the event loop and within a budget.

The offline rules provider matches patterns against user text: pure CPU work,
which on the event loop would hold up every other job of the worker. It runs
in a thread instead, and checks a deadline between bounded pieces (one clause,
one candidate). A thread alone would not be enough: CPython's ``re`` holds the
GIL for a whole match, so one long match still stalls the loop. The pieces are
kept short (rules.MAX_CLAUSE_CHARS, single spaces), so the loop gets the GIL
back between them, and the deadline stops a slice whose pieces add up.

The budget counts the thread's own CPU time (``time.thread_time``), not wall
time: a loaded machine, or other threads holding the GIL, do not make a slice
go over, so the same slice is skipped or not whatever the load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from worker.errors import ProviderWorkOverBudget

T = TypeVar("T")
Checkpoint = Callable[[], None]


def no_deadline() -> None:
    """The checkpoint of a call without a budget (tests, the CLI's pure uses)."""


class CpuDeadline:
    """``check()`` raises ProviderWorkOverBudget once the thread used ``budget_s`` of CPU."""

    __slots__ = ("_budget_s", "_until")

    def __init__(self, budget_s: float) -> None:
        self._budget_s = budget_s
        self._until = time.thread_time() + budget_s

    def check(self) -> None:
        if time.thread_time() > self._until:
            raise ProviderWorkOverBudget(
                f"the provider's CPU work went over its budget of {self._budget_s:g} s"
                " (MEMFLEET_PROVIDER_CPU_BUDGET_S)")


class CpuThreads:
    """The threads provider CPU work runs in, apart from the loop's default executor:
    that one also resolves host names for new connections, which must not queue
    behind seconds of pattern matching. Two threads: under the GIL more would not
    add throughput, and one long slice does not hold up every other."""

    THREADS = 2

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(self.THREADS, thread_name_prefix="memfleet-cpu")

    async def run(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        """Idempotent; work already given finishes (each within its budget)."""
        self._executor.shutdown(wait=False)


async def run_in_thread(work: Callable[[Checkpoint], T], budget_s: float,
                        threads: CpuThreads | None = None) -> T:
    """``work(checkpoint)`` in a thread (of ``threads``, else the loop's default
    executor), its checkpoint enforcing ``budget_s``.

    A cancelled caller (the job's timeout) does not stop the thread, but the
    deadline does, within one piece of the budget.
    """

    def run() -> T:
        return work(CpuDeadline(budget_s).check)

    return await (threads.run(run) if threads is not None else asyncio.to_thread(run))
