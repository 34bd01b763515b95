"""A server process's runtime: the worker's event loop, and the garbage collector after
start-up."""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections.abc import Iterator

import pytest

from worker.fleet.app import new_event_loop
from worker.fleet.gc_tuning import YOUNG_GC_THRESHOLD, quiet_garbage_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.usefixtures("restored_collector")
def test_start_up_objects_are_frozen_and_garbage_is_not() -> None:
    gc.unfreeze()
    kept = _Cycle()
    garbage = _Cycle()
    dead = weakref.ref(garbage)
    del garbage  # a cycle: only the collector frees it

    quiet_garbage_collector()

    assert dead() is None  # collected before the freeze, not frozen for good
    # What lived on is in the permanent generation: collections no longer walk it.
    assert gc.get_freeze_count() > 0
    assert all(o is not kept for o in gc.get_objects())
    assert gc.get_threshold()[0] == YOUNG_GC_THRESHOLD


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows wheel")
def test_the_worker_loop_is_uvloop_and_runs_coroutines() -> None:
    import uvloop

    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert loop.run_until_complete(asyncio.sleep(0, result="ran")) == "ran"
    finally:
        loop.close()


def test_without_uvloop_the_worker_loop_is_asyncio_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    loop = new_event_loop()
    try:
        assert type(loop).__module__.startswith("asyncio")
    finally:
        loop.close()
