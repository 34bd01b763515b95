"""The model calls a run made, read off the OpenAI-compatible stub's request log: chat
calls by their wire task, embeddings calls, and the chat requests' input tokens
(tiktoken's cl100k_base, as bench/tokens.py, plus PER_MESSAGE tokens of framing per
chat message). What bench.notes_cost and bench.parts_cost count per committed job, and
the conversations both run (``talk``)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import asyncpg
import tiktoken
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import drain_queue
from worker.telemetry import Telemetry

PER_MESSAGE = 4


def request_tokens(encoding: tiktoken.Encoding, body: dict[str, Any]) -> int:
    return sum(len(encoding.encode(m["content"])) + PER_MESSAGE for m in body["messages"])


def take_calls(stub: StubServer, encoding: tiktoken.Encoding) -> tuple[Counter[str], int]:
    """The calls recorded since the last take (chat calls by task, and "embeddings")
    and the chat requests' input tokens; the stub's log starts empty again."""
    calls: Counter[str] = Counter()
    tokens = 0
    recorded = stub.recorded()
    stub.reset()  # the next take starts from nothing
    for record in recorded:
        if record["path"].endswith("/embeddings"):
            calls["embeddings"] += 1
            continue
        calls[json.loads(record["body"]["messages"][1]["content"])["task"]] += 1
        tokens += request_tokens(encoding, record["body"])
    return calls, tokens


async def talk(settings: Settings, telemetry: Telemetry, sessions: Sequence[Sequence[str]],
               users: int, reply: str) -> None:
    """Each session's user turns said by ``users`` users (u0, u1...), each turn handed
    over with the history before it, and a burst worker after each round of turns."""
    redis = Redis.from_url(settings.redis_url or "")
    try:
        for session, said in enumerate(sessions):
            history: dict[str, list[dict[str, str]]] = {}
            for text in said:
                for u in range(users):
                    turns = history.setdefault(f"u{u}", [])
                    turns += [{"role": "user", "content": text},
                              {"role": "assistant", "content": reply}]
                    await schedule_memory_persistence(redis, f"s{session}", f"u{u}",
                                                      turns[:-1])
                await drain_queue(settings, telemetry=telemetry)
    finally:
        await redis.aclose()


async def committed_jobs(database_url: str) -> tuple[int, int]:
    """The committed runs and their output tokens (the runs' audit rows)."""
    conn = await asyncpg.connect(database_url)
    try:
        jobs, output = await conn.fetchrow(
            "SELECT count(*), coalesce(sum(output_tokens), 0) FROM memory_run"
            " WHERE outcome = 'committed'")
    finally:
        await conn.close()
    return int(jobs), int(output)
