"""`memfleet demo`: a user talks over four sessions with two assistants, changes their mind,
and memory follows: profile facts shared by both assistants, relationship facts kept
with each, a move dated to when it happened, a plan that expires by itself.

Runs the real thing: migrate, hand each turn over as a chat server would, let a
worker drain the queue after each session, and print each session's words beside
what memfleet did with them, then what it knows. A demo user left by an earlier run
is erased first, by the real erase (`memfleet consent erase`), so every run tells the
same story (and a run against a real model is not hidden behind an earlier run's facts).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from worker.client.handover import schedule_memory_persistence
from worker.config import Settings, secret
from worker.fleet.app import drain_queue
from worker.memory_rules import Limits
from worker.ops.privacy import erase_user
from worker.store.fence_key import fence_keys
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

INTRO = f"""
Ada ({USER}) talks with luna, then orion, over four sessions. Each of her messages
is handed over to memfleet as a chat server would; after each session a worker
drains the queue. Below, her words, then what memfleet did with them:
  + added   ~ updated (the old fact stays, superseded)   - no longer true   = already known"""

# A run's outcome, in words (worker.outcomes has them all).
OUTCOME_WORDS = {
    "empty": "nothing new to read",
    "opted_out": f"memory is off for {USER}, nothing learned"
                 f" (`memfleet consent enable --user {USER}` turns it on)",
}


def _scope(fact: FactRecord) -> str:
    return f"with {fact.agent_id} only" if fact.agent_id else "profile"


def _with(fact: FactRecord) -> str:
    return f"  ({_scope(fact)})" if fact.agent_id else ""


def fact_changes(before: dict[int, FactRecord], after: list[FactRecord]) -> list[str]:
    """What the runs between two reads of the user's facts (superseded ones included)
    did, one line a fact, marked as INTRO says."""
    lines = []
    for fact in after:
        old = before.get(fact.id)
        if old is None:
            replaced = next((f for f in after if f.superseded_by == fact.id), None)
            if replaced is None:
                lines.append(f"+ [{fact.id}] {fact.text}{_with(fact)}")
            else:
                lines.append(f"~ [{replaced.id}] {replaced.text} -> [{fact.id}] {fact.text}"
                             f"{_with(fact)}")
        elif (old.superseded_at is None and fact.superseded_at is not None
              and fact.superseded_by is None):
            lines.append(f"- [{fact.id}] {fact.text}{_with(fact)}")
    return lines


def run_line(run: dict[str, Any]) -> str:
    """One run (memory_run's row), in words."""
    if run["outcome"] != "committed":
        words = OUTCOME_WORDS.get(run["outcome"], "see `memfleet runs`")
        return f"memfleet: {run['outcome']}, {words}"
    held = f", {run['rejected']} held for the user" if run.get("rejected") else ""
    return (f"memfleet: {_count(run['slice_len'], 'new message')} read,"
            f" {_count(run['candidates'], 'fact')} found{held}, committed")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _known_line(fact: FactRecord) -> str:
    when = []
    valid_from = fact.valid_from or fact.observed_at
    if valid_from.date() != fact.observed_at.date():
        when.append(f"holds from {valid_from.date()}, learned {fact.observed_at.date()}")
    if fact.expires_at is not None:
        when.append(f"expires {fact.expires_at.date()}")
    dates = "; " + ", ".join(when) if when else ""
    return (f"  [{fact.id}] {fact.text}  ({_scope(fact)}, {fact.category},"
            f" importance {fact.importance}{dates})")


async def _erase_earlier_run(redis: Redis, store: PostgresStore, settings: Settings) -> None:
    facts = await store.facts(USER, include_superseded=True, scope="all")
    runs = await store.runs(USER)
    if not facts and not runs:
        return
    await erase_user(redis, store, USER, queue_name=settings.queue_name)
    print(f"\nAn earlier run left {USER}'s memory behind ({len(facts)} facts, {len(runs)} runs):"
          f" erased first,\nas `memfleet consent erase --user {USER}` does, so this run"
          " starts from nothing.")


async def _hand_over_session(redis: Redis, settings: Settings, session_id: str,
                             turns: list[tuple[str, str]]) -> None:
    history: list[dict[str, Any]] = []
    for role, content in turns:
        history.append({"role": role, "content": content})
        if role != "user":
            continue
        print(f"  Ada: {content}")
        # What a chat server does after each turn: one fast hand-over call.
        await schedule_memory_persistence(
            redis, session_id, USER, list(history), limits=Limits.from_settings(settings),
            queue_name=settings.queue_name, agent_id=AGENTS[session_id],
        )


async def run_demo(settings: Settings) -> int:
    print(f"database: {settings.database_url}\nredis:    {settings.redis_url}")
    applied = await migrate(
        settings.database_url or "", embed_dim=settings.embed_dim,
        pg_partitions=settings.pg_partitions)
    print("migrated: " + (", ".join(applied) if applied else "already up to date"))
    redis = Redis.from_url(settings.redis_url or "")
    store = await PostgresStore.connect(
        settings.database_url or "",
        fences=fence_keys(secret(settings.erase_fence_key), settings.home_dir))
    try:
        await _erase_earlier_run(redis, store, settings)
        print(INTRO)
        seen_runs = 0
        for session_id, turns in SESSIONS:
            print(f"\n{session_id}, with {AGENTS[session_id]}:")
            before = {f.id: f for f in await store.facts(USER, include_superseded=True,
                                                         scope="all")}
            await _hand_over_session(redis, settings, session_id, turns)
            await drain_queue(settings)
            runs = await store.runs(USER)
            new_runs, seen_runs = runs[seen_runs:], len(runs)
            after = await store.facts(USER, include_superseded=True, scope="all")
            for run in new_runs:
                print(f"  {run_line(run)}")
            for line in fact_changes(before, after):
                print(f"    {line}")
            if unchanged := sum(run["unchanged"] for run in new_runs):
                print(f"    = {unchanged} already known: nothing stored")
        print(f"\nWhat memfleet knows about {USER} now:")
        known = [fact for fact in after if fact.superseded_at is None]
        for fact in known:
            print(_known_line(fact))
        if not known:
            print("  nothing")
        print(f"Superseded facts stay as history: memfleet facts --user {USER} --all")
    finally:
        await store.aclose()
        await redis.aclose()
    return 0
