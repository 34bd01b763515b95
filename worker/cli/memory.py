"""Users' memory: what it holds, the user's say over it, and facts in and out:
`memfleet facts`, `consent`, `export`, `import`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from worker.cli.common import Commands, moment, open_redis, resolve, with_store
from worker.config import Settings
from worker.errors import MemfleetError
from worker.memory_rules import MEMORY_SCOPES


def register(commands: Commands) -> None:
    facts = commands.add_parser("facts", help="print a user's facts")
    facts.add_argument("--user", required=True, help="the user's id")
    facts.add_argument("--json", action="store_true",
                       help="one JSON list, every field of each fact")
    facts.add_argument("--all", action="store_true", help="include superseded facts")
    facts.add_argument("--scope", choices=MEMORY_SCOPES,
                       help="profile, the agent's relationship facts, both, none, or all"
                            " (default: both with --agent, else all)")
    facts.add_argument("--agent", help="the agent whose relationship facts are read")
    facts.add_argument("--valid-at", metavar="ISO", help="the facts true then, by what is "
                                                         "known now")
    facts.add_argument("--known-at", metavar="ISO", help="the facts memfleet believed then")
    facts.set_defaults(handler=cmd_facts)
    consent = commands.add_parser("consent", help="a user's memory: show, enable, disable, "
                                                  "forget (disable and erase), erase")
    consent.add_argument("action", choices=["show", "enable", "disable", "forget", "erase"],
                         help="show the setting; turn memory on or off; forget (off, then "
                              "erase); erase everything held about the user")
    consent.add_argument("--user", required=True, help="the user's id")
    consent.set_defaults(handler=cmd_consent)
    export = commands.add_parser("export", help="everything held about a user, as JSON "
                                                "(right of access)")
    export.add_argument("--user", required=True, help="the user's id")
    export.set_defaults(handler=cmd_export)
    importer = commands.add_parser("import", help="write facts from a JSONL file, or pass "
                                                  "old memory blobs through extraction "
                                                  "(idempotent)")
    source = importer.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help="JSONL: one fact a line ({user_id, text, ...})")
    source.add_argument("--legacy", help="JSONL: one old free-text memory a line "
                                         "({user_id, text, id})")
    importer.set_defaults(handler=cmd_import)


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
    if not facts:
        # A mistyped id reads as an empty memory: said, on stderr (stdout stays the answer).
        print(f"memfleet: {_nothing_for(args)}", file=sys.stderr)
    if args.json:
        print(json.dumps(facts, ensure_ascii=False, indent=2))
    else:
        for fact in facts:
            mark = "  " if fact["superseded_at"] is None else "x "
            agent = f" @{fact['agent_id']}" if fact["agent_id"] else ""
            print(f"{mark}[{fact['id']}] {fact['text']}  ({fact['category']}{agent})")
    return 0


def _nothing_for(args: argparse.Namespace) -> str:
    """What an empty answer of `memfleet facts` means: no fact of these kinds for this id."""
    which = "facts" if args.all or args.valid_at or args.known_at else "active facts"
    user = args.user if len(args.user) <= 40 else args.user[:40] + "..."
    where = [f"with agent {args.agent!r}" if args.agent else "",
             f"in scope {args.scope}" if args.scope else "",
             f"valid at {args.valid_at}" if args.valid_at else "",
             f"known at {args.known_at}" if args.known_at else ""]
    return " ".join(["no", which, f"for user {user!r}", *filter(None, where)]) + (
        ": check the id" + ("" if args.all or args.valid_at or args.known_at
                            else "; --all adds superseded facts"))


def cmd_consent(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops import privacy

    settings = resolve(settings)

    async def go(store: Any) -> Any:
        if args.action == "show":
            chosen = await store.consent(args.user)
            enabled = settings.memory_default if chosen is None else chosen
            return {"enabled": enabled, "chosen": chosen is not None}
        redis = open_redis(settings)
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
        except BrokenPipeError:  # stdout's reader went away: worker.cli.main says so
            raise
        except OSError as exc:  # the file, mid-way: the servers' errors are translated
            raise MemfleetError(f"reading {path} failed: {type(exc).__name__}") from None
    # Nothing usable in the file is the one failure of the input itself; bad lines
    # beside good ones are reported above and the run succeeds.
    return 0 if report.usable else 1


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.access_export import export_user
    from worker.store.maintenance import PostgresMaintenanceStore

    settings = resolve(settings)

    async def go() -> None:
        store = await PostgresMaintenanceStore.connect(settings.database_url or "", max_size=1)
        try:
            async for chunk in export_user(store, args.user,
                                           memory_default=settings.memory_default):
                sys.stdout.write(chunk)
        finally:
            await store.aclose()

    asyncio.run(go())
    sys.stdout.write("\n")
    return 0
