"""CPU milliseconds of the work done on user and model text (issue 25).

    PYTHONPATH=<tree> python -m bench.text_cpu

Prints, for each adversarial input, the CPU time of the rules extractor
(``extract_facts``) or of the tolerant answer parser (``parse_answer``), and
what came of it. Run it on two trees to compare them. Every input is at most
the hand-over's per-message limit (32,000 characters) or, for model answers,
56 KB of reasoning text as in the issue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from worker.providers.llm_json import parse_answer
from worker.providers.rules import RulesExtractor, extract_facts
from worker.providers.wire import ExtractionAnswer, ExtractionRequest, WireMessage

T = TypeVar("T")
LIMIT = 32_000

MESSAGES: dict[str, str] = {
    "filler 'I use X now now now ...'": ("I use Postgres" + " now" * LIMIT)[:LIMIT],
    "whitespace run 'I use' + spaces + 'x'": "I use" + " " * (LIMIT - 7) + " x",
    "newline-space run": "I live in" + " \n" * ((LIMIT - 12) // 2) + " x",
    "'my ... is' long fact": "my " + "a" * (LIMIT - 20) + " is great",
    "'I switched from' repeated": ("I switched from " * LIMIT)[:LIMIT],
    "'I don't use' + spaces": "I don't use x" + " " * (LIMIT - 30) + " y",
    "emoji + commas": ("I like \U0001f600, " * LIMIT)[:LIMIT],
    "ordinary sentences": ("I live in Lisbon. I use Postgres now. My name is Ana. " * 600)[:LIMIT],
}

ANSWERS: dict[str, str] = {
    "56 KB <think> + answer": "<think>" + "hmm " * 14_000 + "</think>" + '{"facts": []}',
    "56 KB unclosed <think> x many": "<think>" * 8_000,
    "56 KB '{\"a' braces": '{"a' * 18_700,
    "56 KB nested '['": "{" + "[" * 56_000,
}


def cpu_ms(call: Callable[[], object]) -> tuple[float, str]:
    started = time.process_time()
    try:
        result = call()
        outcome = type(result).__name__
        if isinstance(result, ExtractionAnswer):
            outcome = f"{len(result.facts)} fact(s)"
    except Exception as exc:  # noqa: BLE001 - the bench reports what happened
        outcome = f"raised {type(exc).__name__}"
    return (time.process_time() - started) * 1000, outcome


async def timing_the_loop(work: Awaitable[T], tick_s: float = 0.001) -> tuple[T, float]:
    """``work``'s result, and the longest (s) the event loop went unserved meanwhile:
    a ticker that should wake every ``tick_s`` records its longest gap."""
    longest, started, done = 0.0, asyncio.Event(), asyncio.Event()

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        started.set()
        while not done.is_set():
            await asyncio.sleep(tick_s)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now

    ticking = asyncio.create_task(ticker())
    await started.wait()
    try:
        result = await work
    finally:
        done.set()
        await ticking
    return result, longest


async def loop_stall_ms(request: ExtractionRequest) -> float:
    """The longest the event loop went unserved while the rules provider extracted."""

    async def extract() -> None:
        with contextlib.suppress(Exception):  # only the stall is measured here
            await RulesExtractor().extract(request)

    _, longest = await timing_the_loop(extract())
    return longest * 1000


def main() -> None:
    for name, text in MESSAGES.items():
        request = ExtractionRequest(observed_at="2026-11-22 (Sunday)", summary=None, context=(),
                                    messages=(WireMessage(role="user", content=text),))
        ms, outcome = cpu_ms(lambda r=request: extract_facts(r))  # type: ignore[misc]
        print(f"extract_facts  {name:40} {len(text):>6} chars {ms:10.1f} ms CPU  {outcome}")
    for name in ("whitespace run 'I use' + spaces + 'x'", "ordinary sentences"):
        request = ExtractionRequest(observed_at="2026-11-22 (Sunday)", summary=None, context=(),
                                    messages=(WireMessage(role="user", content=MESSAGES[name]),))
        stall = asyncio.run(loop_stall_ms(request))
        print(f"loop stall     {name:40} {len(MESSAGES[name]):>6} chars {stall:10.1f} ms wall"
              "  (longest the event loop went unserved during RulesExtractor.extract)")
    for name, text in ANSWERS.items():
        ms, outcome = cpu_ms(lambda t=text: parse_answer(t, ExtractionAnswer))  # type: ignore[misc]
        print(f"parse_answer   {name:40} {len(text):>6} chars {ms:10.1f} ms CPU  {outcome}")


if __name__ == "__main__":
    main()
