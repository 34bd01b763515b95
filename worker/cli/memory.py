"""The commands on users' memory: facts, runs, retry, consent, export, import,
expire and reembed. ``worker.cli.main`` parses the arguments and dispatches here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from worker.cli.common import moment, resolve, with_store
from worker.config import Settings
from worker.errors import MemfleetError


def cmd_facts(settings: Settings, args: argparse.Namespace) -> int:
    valid_at = moment("--valid-at", args.valid_at)
    known_at = moment("--known-at", args.known_at)
    if valid_at is not None and known_at is not None:
        raise MemfleetError("--valid-at and --known-at cannot be combined")
    if args.all and (valid_at is not None or known_at is not None):
        raise MemfleetError("--all cannot be combined with --valid-at or --known-at")
    if args.scope == "relationship" and args.agent is None:
        raise MemfleetError("--scope relationship needs --agent")
    # No scope asked: what one agent sees when an agent is named, else everything.
    scope = args.scope or ("both" if args.agent else "all")
    settings = resolve(settings)
    records = asyncio.run(with_store(settings, lambda store: store.facts(
        args.user, include_superseded=args.all, scope=scope, agent_id=args.agent,
        valid_at=valid_at, known_at=known_at)))
    facts = [f.to_json() for f in records]
    if args.json:
        print(json.dumps(facts, ensure_ascii=False, indent=2))
    else:
        for fact in facts:
            mark = "  " if fact["superseded_at"] is None else "x "
            agent = f" @{fact['agent_id']}" if fact["agent_id"] else ""
            print(f"{mark}[{fact['id']}] {fact['text']}  ({fact['category']}{agent})")
    return 0


def cmd_runs(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.dead_letters import describe_run

    settings = resolve(settings)
    outcomes = [o.strip() for o in args.outcome.split(",") if o.strip()]
    runs = asyncio.run(with_store(settings, lambda store: store.runs_by_outcome(
        outcomes, args.limit)))
    rows = [describe_run(run) for run in runs]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        for run in rows:
            print(f"{run['finished_at']}  {run['outcome']:<8} user={run['user_id']}"
                  f" session={run['session_id']}"
                  f" try={run['job_try']}  {run['error'] or ''}")
    return 0


def cmd_retry(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.dead_letters import redrive

    if args.session is not None and args.user is None:
        print("memfleet: error: retry --session needs --user (sessions are per user)",
              file=sys.stderr)
        return 2

    settings = resolve(settings)

    async def go(store: Any) -> Any:
        redis = Redis.from_url(settings.redis_url or "")
        try:
            return await redrive(redis, store, settings.queue_name,
                                 None if args.failed else [(args.user, args.session)])
        finally:
            await redis.aclose()

    results = asyncio.run(with_store(settings, go))
    for result in results:
        print(f"{result.user_id} {result.session_id}: {result.status}")
    return 1 if any(r.status == "no hand-over in Redis" for r in results) else 0


def cmd_consent(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops import privacy

    settings = resolve(settings)

    async def go(store: Any) -> Any:
        if args.action == "show":
            chosen = await store.consent(args.user)
            enabled = settings.memory_default if chosen is None else chosen
            return {"enabled": enabled, "chosen": chosen is not None}
        redis = Redis.from_url(settings.redis_url or "")
        try:
            if args.action == "erase":
                return {"deleted": await privacy.erase_user(
                    redis, store, args.user, queue_name=settings.queue_name)}
            deleted = await privacy.set_memory(redis, store, args.user,
                                               enabled=args.action == "enable",
                                               forget=args.action == "forget",
                                               queue_name=settings.queue_name)
            return {"enabled": args.action == "enable", "chosen": True, "deleted": deleted}
        finally:
            await redis.aclose()

    print(json.dumps(asyncio.run(with_store(settings, go))))
    return 0


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.importer import ImportReport, run_import

    path = Path(args.file or args.legacy)
    try:
        stream = path.open("rb")
    except OSError as exc:
        raise MemfleetError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None

    def problem(line: int, reason: str) -> None:
        print(f"memfleet: {path.name} line {line}: {reason}", file=sys.stderr)

    def counts(report: ImportReport) -> None:
        print(json.dumps(report.to_json()), flush=True)

    with stream:
        settings = resolve(settings)
        try:
            report = asyncio.run(run_import(settings, stream, legacy=args.legacy is not None,
                                            on_problem=problem, on_report=counts))
        except OSError as exc:  # the file, mid-way: the servers' errors are translated
            raise MemfleetError(f"reading {path} failed: {type(exc).__name__}") from None
    # Nothing usable in the file is the one failure of the input itself; bad lines
    # beside good ones are reported above and the run succeeds.
    return 0 if report.usable else 1


def cmd_expire(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.expiry import expire_due
    from worker.store.pool import create_pool

    settings = resolve(settings)

    async def go() -> int:
        pool = await create_pool(settings.database_url or "", min_size=1, max_size=1)
        try:
            return await expire_due(pool)
        finally:
            await pool.close()

    print(json.dumps({"expired": asyncio.run(go())}))
    return 0


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.access_export import export_user
    from worker.store.pool import create_pool

    settings = resolve(settings)

    async def go() -> None:
        pool = await create_pool(settings.database_url or "", min_size=1, max_size=1)
        try:
            async for chunk in export_user(pool, args.user,
                                           memory_default=settings.memory_default):
                sys.stdout.write(chunk)
        finally:
            await pool.close()

    asyncio.run(go())
    sys.stdout.write("\n")
    return 0


def cmd_reembed(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.reembed import Counts, Target, run_reembed

    def progress(counts: Counts) -> None:
        print(f"pass {counts.passes}: {counts.users} users moved, {counts.facts} facts",
              file=sys.stderr, flush=True)

    settings = resolve(settings)
    outcome = asyncio.run(run_reembed(settings, Target(args.model, args.dim), batch=args.batch,
                                      progress=progress))
    print(outcome.line())
    return 0


COMMANDS = {
    "facts": cmd_facts,
    "runs": cmd_runs,
    "retry": cmd_retry,
    "consent": cmd_consent,
    "import": cmd_import,
    "expire": cmd_expire,
    "export": cmd_export,
    "reembed": cmd_reembed,
}
