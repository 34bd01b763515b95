"""The OpenAI stub: its request log, and a latency fault's timing."""

from __future__ import annotations

import asyncio
import gc
import json
from types import SimpleNamespace

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.testclient import TestClient

from api_stub import llm_faults
from api_stub.llm_faults import answered_after_latency
from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, StubState, create_app
from worker.providers.llm_json import json_schema_format
from worker.providers.wire import ConsolidationAnswer


def _chat_body(number: int) -> bytes:
    """A body shaped as the worker's consolidation requests: nested JSON schema included."""
    return json.dumps({
        "model": "m",
        "messages": [{"role": "system", "content": "decide"},
                     {"role": "user", "content": f"message {number}"}],
        "response_format": json_schema_format("consolidation", ConsolidationAnswer),
    }).encode()


def test_recorded_bodies_are_parsed_when_read() -> None:
    state = StubState()
    assert state.record(CHAT_PATH, _chat_body(1), "Bearer k") == 1
    assert state.record(EMBED_PATH, b"not json", None) == 2
    assert state.record(EMBED_PATH, b"[1, 2]", None) == 3  # JSON, but not an object

    chat, garbled, listed = state.recorded()

    assert chat["path"] == CHAT_PATH and chat["authorization"] == "Bearer k"
    assert chat["body"]["messages"][1]["content"] == "message 1"
    assert garbled["body"] is None and listed["body"] is None


def test_recorded_with_clear_empties_the_log() -> None:
    state = StubState()
    state.record(CHAT_PATH, _chat_body(1), None)
    assert len(state.recorded(clear=True)) == 1
    assert state.recorded() == []


def test_the_log_adds_few_objects_for_the_garbage_collector_to_walk() -> None:
    """Parsed bodies in a full log are hundreds of thousands of objects that every full
    collection of the stub's process walks, pausing the answers in flight (a bench's
    stub shares its process with the bench's driver)."""
    state = StubState()
    bodies = [_chat_body(n) for n in range(300)]
    with TestClient(create_app(state)) as client:
        client.post(CHAT_PATH, content=bodies[0])  # the client's and the app's first-use objects
        gc.collect()
        before = len(gc.get_objects())
        for body in bodies[1:]:
            client.post(CHAT_PATH, content=body)  # 400: not a wire request; recorded all the same
        gc.collect()
        grown = len(gc.get_objects()) - before

    assert len(state.recorded()) == len(bodies)
    # The entry's dict per request; each parsed body would add over a dozen more.
    assert grown <= 3 * len(bodies)


class FakeClock:
    """The stub's clock and sleep, advanced only by the sleeps: timings exact, whatever
    the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0
        self.held: list[float] = []  # the stub's own sleeps (the latency it holds)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.held.append(seconds)
        self.now += max(0.0, seconds)


def _timed(work_s: float, latency_ms: int | None, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The clock after a request to a handler working ``work_s`` (on the same clock)."""
    clock = FakeClock()
    monkeypatch.setattr(llm_faults, "time", SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(llm_faults, "asyncio", SimpleNamespace(sleep=clock.sleep))

    @answered_after_latency
    async def handler(request: Request) -> Response:
        if latency_ms is not None:
            request.state.latency_ms = latency_ms  # as a "latency_ms" fault notes it
        clock.now += work_s  # building the answer
        return PlainTextResponse("ok")

    asyncio.run(handler(Request({"type": "http", "method": "POST", "headers": []})))
    return clock


def test_a_latency_counts_from_the_request_not_from_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model answering in 300 ms answers in 300 ms, however long the stub took to
    build the answer: its own work does not add to the delay."""
    clock = _timed(work_s=0.15, latency_ms=300, monkeypatch=monkeypatch)
    assert clock.now == pytest.approx(0.3)  # not 0.45: the work is inside the delay
    assert clock.held == [pytest.approx(0.15)]


def test_work_longer_than_the_latency_is_not_delayed_further(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _timed(work_s=0.2, latency_ms=50, monkeypatch=monkeypatch)
    assert clock.now == pytest.approx(0.2)
    assert all(held <= 0 for held in clock.held)


def test_without_a_latency_fault_the_answer_is_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _timed(work_s=0.0, latency_ms=None, monkeypatch=monkeypatch)
    assert clock.held == [] and clock.now == 0.0
