"""The user's portrait under a steady load (docs/portrait.md): how often portraits are
refreshed, and what they cost per committed job, with portraits on and off.

A soak: ``--users`` users each hand one session over again every ``--every-s``
seconds for ``--seconds`` (a new turn each time, most of them a fact the offline rules
read), while one ``memfleet worker`` process of this process's own (ARQ, not a burst)
commits them: the openai providers over HTTP to the OpenAI-compatible stub in a thread
(zero latency; it counts tokens as characters / 4), hashing embeddings, throwaway
PostgreSQL and Redis. Run twice, portraits off then on, the same load. Reported: the
committed jobs, the model calls and input/output tokens per committed job (by pass),
and with portraits on the refreshes written per user and minute against the bound the
settings allow (one per MEMFLEET_PORTRAIT_MIN_INTERVAL, or per
MEMFLEET_PORTRAIT_MAX_COMMITS commits), and the commits that joined a queued refresh.

    .venv/bin/python -m bench.portrait_rate [--users 20] [--seconds 60] [--every-s 2]
        [--interval-min 0.25] [--max-commits 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer, count_tokens
from bench.lib.servers import throwaway_servers
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import build_worker
from worker.protocol.keys import waiting_key
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

DIM = 64  # embeddings are no chat tokens; a small dimension keeps the run light
CATCH_UP_S = 600.0  # the most the worker may take to commit the backlog after the soak
_SAID = ["I live in {c}.", "I like {t}.", "I use {t}.", "I work at {c} Labs.",
         "Thanks, that helps.", "I moved to {c}.", "I'm learning {t}.", "ok"]
_CITIES = ["Porto", "Oslo", "Lima", "Graz", "Quito", "Turku", "Cork", "Bern", "Riga"]
_THINGS = ["chess", "Rust", "jazz", "Kotlin", "tango", "Go", "sailing", "Vim", "tea"]


def turn(user: int, index: int) -> str:
    said = _SAID[(user + index) % len(_SAID)]
    return said.format(c=_CITIES[(user * 3 + index) % len(_CITIES)],
                       t=_THINGS[(user * 5 + index) % len(_THINGS)])


async def _soak(settings: Settings, redis: Redis, users: int, seconds: float,
                every_s: float) -> int:
    """Hand each user's session over again every ``every_s`` for ``seconds``; the
    hand-overs made."""
    histories: list[list[dict[str, str]]] = [[] for _ in range(users)]
    made = 0
    began = time.monotonic()
    tick = 0
    while time.monotonic() - began < seconds:
        for user in range(users):
            histories[user] += [{"role": "user", "content": turn(user, tick)},
                                {"role": "assistant", "content": "Noted."}]
            await schedule_memory_persistence(redis, "s1", f"user-{user}", histories[user],
                                              queue_name=settings.queue_name)
            made += 1
        tick += 1
        await asyncio.sleep(max(0.0, began + tick * every_s - time.monotonic()))
    return made


def _tally(stub: StubServer) -> dict[str, Counter[str]]:
    """Calls, input and output tokens per task, from the stub's record."""
    calls, tokens_in, tokens_out = Counter[str](), Counter[str](), Counter[str]()
    for request in stub.recorded():
        body = request["body"]
        if request["path"] != CHAT_PATH or not isinstance(body, dict):
            continue
        task = json.loads(body["messages"][1]["content"])["task"]
        calls[task] += 1
        tokens_in[task] += sum(count_tokens(m["content"]) for m in body["messages"])
    answered = _answers(stub)
    for task, size in answered.items():
        tokens_out[task] += size
    return {"calls": calls, "input": tokens_in, "output": tokens_out}


def _answers(stub: StubServer) -> Counter[str]:
    # The stub's answers are the rules', recomputed here for their size (it records
    # requests only); tokens as the stub counts them.
    from api_stub.llm_answers import answer_for

    out = Counter[str]()
    for request in stub.recorded():
        body = request["body"]
        if request["path"] != CHAT_PATH or not isinstance(body, dict):
            continue
        document = json.loads(body["messages"][1]["content"])
        out[document["task"]] += count_tokens(json.dumps(answer_for(document)))
    return out


async def run_once(base: Settings, stub: StubServer, *, portraits: bool, users: int,
                   seconds: float, every_s: float) -> dict[str, Any]:
    settings = base.model_copy(update={"portrait_enabled": portraits})
    stub.reset()
    telemetry = setup_telemetry(settings, "memfleet-bench")
    redis = Redis.from_url(settings.redis_url or "")
    worker = build_worker(settings, telemetry=telemetry, handle_signals=False)
    running = asyncio.create_task(worker.main())
    try:
        began = time.monotonic()
        made = await _soak(settings, redis, users, seconds, every_s)
        # Until every hand-over is committed and no job runs; refreshes still queued
        # (due up to an interval later) are counted as pending, not waited for.
        while await redis.zcard(waiting_key(settings.queue_name)) or worker.job_counter:
            if time.monotonic() - began > seconds + CATCH_UP_S:
                raise SystemExit("the worker did not catch up in time")
            await asyncio.sleep(0.2)
        elapsed = time.monotonic() - began
        pending = await redis.zcard(settings.queue_name)
    finally:
        running.cancel()  # a no-op once it has ended
        await asyncio.gather(running, return_exceptions=True)
        await worker.close()
        await redis.aclose()
        telemetry.shutdown()
    conn = await asyncpg.connect(settings.database_url)
    try:
        committed = await conn.fetchval(
            "SELECT count(*) FROM memory_run WHERE outcome = 'committed'")
        changed = await conn.fetchval(
            "SELECT count(*) FROM memory_run WHERE outcome = 'committed'"
            " AND added + updated + deleted > 0")
        versions = await conn.fetch("SELECT user_id, count(*) AS n FROM memory_portrait"
                                    " GROUP BY user_id")
        await conn.execute("TRUNCATE memory_fact, memory_run, session_cursor,"
                           " user_memory_state, memory_portrait, memory_held_proposal")
    finally:
        await conn.close()
    await Redis.from_url(settings.redis_url or "").flushall()
    tally = _tally(stub)
    return {"portraits": portraits, "hand_overs": made, "elapsed_s": elapsed,
            "committed": committed, "changed": changed, "pending": pending,
            "versions": sorted(r["n"] for r in versions), **tally}


def _per_job(counter: Counter[str], jobs: int) -> str:
    total = sum(counter.values())
    parts = ", ".join(f"{task} {n / jobs:.2f}" for task, n in sorted(counter.items()))
    return f"{total / jobs:.2f} ({parts})"


def report(off: dict[str, Any], on: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"portrait soak: {args.users} users, a hand-over each every {args.every_s:g} s"
             f" for {args.seconds:g} s; MEMFLEET_PORTRAIT_MIN_INTERVAL={args.interval_min:g}"
             f" min, MEMFLEET_PORTRAIT_MAX_COMMITS={args.max_commits}", ""]
    for run in (off, on):
        jobs = max(1, run["committed"])
        lines += [f"portraits {'on' if run['portraits'] else 'off'}: {run['hand_overs']}"
                  f" hand-overs, {run['committed']} committed jobs ({run['changed']} changed"
                  f" facts) in {run['elapsed_s']:.1f} s",
                  f"  model calls per committed job: {_per_job(run['calls'], jobs)}",
                  f"  input tokens per committed job: {_per_job(run['input'], jobs)}",
                  f"  output tokens per committed job: {_per_job(run['output'], jobs)}"]
    minutes = on["elapsed_s"] / 60
    versions = on["versions"] or [0]
    per_user_min = [v / minutes for v in versions]
    changed_per_user_min = on["changed"] / max(1, args.users) / minutes
    # One per interval, or one per max-commits commits that changed facts if sooner.
    bound = max(1 / args.interval_min if args.interval_min else math.inf,
                changed_per_user_min / args.max_commits)
    lines += ["", f"refreshes written per user: min {min(versions)}, median"
              f" {sorted(versions)[len(versions) // 2]}, max {max(versions)}"
              f" ({sum(versions)} in all, {on['calls'].get('user_portrait', 0)} model calls;"
              f" {on['pending']} refreshes still queued at the end, not waited for)",
              f"refresh rate per user: {min(per_user_min):.2f}-{max(per_user_min):.2f} a"
              f" minute, against commits changing facts at {changed_per_user_min:.2f} a minute"
              f" and the settings' bound of {bound:.2f} a minute (the interval's, or the"
              f" max commits', plus a user's first)"]
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> str:
    with throwaway_servers(durable=False) as servers, StubServer(dim=DIM) as stub:
        await migrate(servers.database_url, embed_dim=DIM)
        base = Settings(database_url=servers.database_url, redis_url=servers.redis_url,
                        home_dir=servers.root / "home", llm_provider="openai",
                        llm_base_url=stub.v1, embed_provider="hashing", embed_dim=DIM,
                        expiry_interval_s=0, portrait_min_interval=args.interval_min,
                        portrait_max_commits=args.max_commits)
        off = await run_once(base, stub, portraits=False, users=args.users,
                             seconds=args.seconds, every_s=args.every_s)
        on = await run_once(base, stub, portraits=True, users=args.users,
                            seconds=args.seconds, every_s=args.every_s)
    return report(off, on, args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.portrait_rate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--every-s", type=float, default=2.0)
    parser.add_argument("--interval-min", type=float, default=0.25)
    parser.add_argument("--max-commits", type=int, default=20)
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    print(asyncio.run(_main(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
