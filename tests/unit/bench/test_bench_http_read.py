"""The pure parts of bench.prompt_read, bench.http_handover and bench.lib.handover_client."""

from __future__ import annotations

import asyncio

from bench.http_handover import Block, split
from bench.lib.handover_client import chat_messages, measure
from bench.prompt_read import Measured, fact_texts, questions, timing_parts


def test_server_timing_is_read_into_milliseconds_by_name() -> None:
    assert timing_parts("embed;dur=1.23, store;dur=0.80, total;dur=2.40") == {
        "embed": 1.23, "store": 0.8, "total": 2.4}
    assert timing_parts('store;desc="db";dur=3, cache') == {"store": 3.0}
    assert timing_parts(None) == {} == timing_parts("")


def test_outside_the_model_is_the_client_time_less_the_embed_part() -> None:
    measured = Measured()
    measured.add(5.0, {"embed": 1.5, "store": 2.0, "total": 4.0})
    measured.add(3.0, {"store": 2.0, "total": 2.5})
    assert measured.outside_ms == [3.5, 3.0]
    assert measured.model_ms == [1.5] and measured.model_calls == 1
    assert measured.store_ms == [2.0, 2.0]


def test_the_seeded_facts_and_questions_are_distinct() -> None:
    facts = fact_texts(1000)
    assert len(set(facts)) == 1000
    assert len(set(questions())) == len(questions())


def test_callers_are_spread_over_processes_as_evenly_as_it_goes() -> None:
    assert split(16, 1) == [16]
    assert split(16, 3) == [6, 5, 5]
    assert split(1, 4) == [1]
    assert sum(split(17, 4)) == 17


def test_a_paced_block_says_its_answer_time() -> None:
    assert Block("http", 16).in_flight == "16"
    assert Block("http", 16, 500).in_flight == "16 turns, 500 ms answers"


async def test_every_hand_over_is_a_session_of_a_user_of_its_own() -> None:
    seen: list[tuple[str, str]] = []
    in_flight = peak = 0

    async def hand_over(user: str, session: str) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        seen.append((user, session))

    took, cpu_s = await measure(hand_over, requests=40, concurrency=4, tag="t", warmup=8,
                                wait_ready=False)
    assert len(took) == 40 and len(seen) == 48  # the warm-up is not measured
    assert len({u for u, _ in seen}) == len({s for _, s in seen}) == 48
    assert peak == 4 and all(t >= 1.0 for t in took) and cpu_s >= 0
    assert [m["role"] for m in chat_messages()] == ["user", "assistant"] * 2
