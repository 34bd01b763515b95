"""`memfleet demo`: a user talks over four sessions with two assistants, changes their mind,
and memory follows: profile facts shared by both assistants, relationship facts kept
with each, a move dated to when it happened, a plan that expires by itself.

Runs the real thing: migrate, hand each turn over as a chat server would, let a
worker drain the queue, then print the active facts and every supersession
chain. Running it again changes nothing: every slice was already processed.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import drain_queue
from worker.memory_rules import Limits
from worker.store.migrate import migrate
from worker.store.postgres import PostgresStore
from worker.store.types import FactRecord

USER = "demo-ada"
SESSIONS: list[tuple[str, list[tuple[str, str]]]] = [
    ("demo-monday", [
        ("user", "Hi! My name is Ada and I live in Berlin."),
        ("assistant", "Nice to meet you, Ada! What are you working on?"),
        ("user", "A small analytics service. At work I use Postgres."),
        ("assistant", "Postgres is a solid choice."),
        ("user", "I like hiking, by the way."),
    ]),
    ("demo-thursday", [
        ("user", "Quick update: we switched from Postgres to SQLite."),
        ("assistant", "Got it. Anything else new?"),
        ("user", "Also, I moved to Lisbon last month."),
        ("assistant", "Exciting!"),
        ("user", "I'm flying to Tokyo on Friday. You can call me Ace, by the way."),
        ("assistant", "Safe travels, Ace!"),
        ("user", "ok thanks"),
    ]),
    ("demo-next-week", [
        ("user", "I no longer use SQLite. We use DuckDB."),
        ("assistant", "Noted."),
        ("user", "I like hiking."),
    ]),
    ("demo-orion", [
        ("user", "Hello there. You can call me Captain."),
        ("assistant", "Aye, Captain."),
    ]),
]
# The assistant each session is with (the hand-over's agent_id): what the user says
# about their relationship with one stays with it.
AGENTS: dict[str, str] = {
    "demo-monday": "luna", "demo-thursday": "luna", "demo-next-week": "luna",
    "demo-orion": "orion",
}


def supersession_chains(facts: list[FactRecord]) -> list[list[FactRecord]]:
    """Each chain from its oldest superseded fact to the current one (or to a deletion)."""
    by_id = {f.id: f for f in facts}
    successors = {f.superseded_by for f in facts if f.superseded_by is not None}
    chains = []
    for fact in facts:
        if fact.superseded_at is None or fact.id in successors:
            continue  # start only from the oldest fact of a chain
        chain = [fact]
        while (next_id := chain[-1].superseded_by) is not None:
            chain.append(by_id[next_id])
        chains.append(chain)
    return chains


def _scope(fact: FactRecord) -> str:
    return f"with {fact.agent_id} only" if fact.agent_id else "profile"


def _print_report(facts: list[FactRecord], runs: list[dict[str, Any]]) -> None:
    print("\nRuns (one audit row per job):")
    for run in runs:
        print(f"  {run['session_id']:<15} {run['outcome']:<9} slice={run['slice_len']:<2}"
              f" candidates={run['candidates']:<2} +{run['added']} ~{run['updated']}"
              f" -{run['deleted']} ={run['unchanged']}")
    print(f"\nActive facts about {USER}:")
    for fact in facts:
        if fact.superseded_at is None:
            print(f"  [{fact.id}] {fact.text}  ({_scope(fact)}, {fact.category},"
                  f" importance {fact.importance}, from {fact.source_session_id})")
    print("\nWhen facts hold (valid time) beside when memfleet learned them:")
    for fact in facts:
        valid_from = fact.valid_from or fact.observed_at
        if fact.superseded_at is None and (valid_from.date() != fact.observed_at.date()
                                           or fact.expires_at is not None):
            expiry = f", expires {fact.expires_at.date()}" if fact.expires_at else ""
            print(f"  [{fact.id}] {fact.text}: valid from {valid_from.date()},"
                  f" learned {fact.observed_at.date()}{expiry}")
    print("\nSupersession chains (nothing is overwritten or deleted):")
    for chain in supersession_chains(facts):
        steps = " -> ".join(f"[{f.id}] {f.text}" for f in chain)
        ending = "" if chain[-1].superseded_at is None else " -> (no longer true)"
        print(f"  {steps}{ending}")


async def run_demo(settings: Settings) -> int:
    print(f"database: {settings.database_url}\nredis:    {settings.redis_url}")
    applied = await migrate(settings.database_url or "", embed_dim=settings.embed_dim)
    print("migrated: " + (", ".join(applied) if applied else "already up to date"))
    redis = Redis.from_url(settings.redis_url or "")
    try:
        for session_id, turns in SESSIONS:
            history: list[dict[str, Any]] = []
            for role, content in turns:
                history.append({"role": role, "content": content})
                if role != "user":
                    continue
                # What a chat server does after answering: one fast hand-over call.
                await schedule_memory_persistence(
                    redis, session_id, USER, list(history), limits=Limits.from_settings(settings),
                    queue_name=settings.queue_name, agent_id=AGENTS[session_id],
                )
            print(f"handed over {session_id}: {len(history)} messages; the worker drains...")
            await drain_queue(settings)
    finally:
        await redis.aclose()
    store = await PostgresStore.connect(settings.database_url or "")
    try:
        facts = await store.facts(USER, include_superseded=True, scope="all")
        runs = await store.runs(USER)
    finally:
        await store.aclose()
    _print_report(facts, runs)
    return 0
