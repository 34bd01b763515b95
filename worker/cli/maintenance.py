"""Passes over every user's facts, beside running workers: `memfleet expire`, `reembed`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from worker.cli.common import Commands, resolve
from worker.config import Settings


def register(commands: Commands) -> None:
    commands.add_parser("expire", help="supersede the facts whose expires_at has come "
                                       "(workers also do it every MEMFLEET_EXPIRY_INTERVAL_S)"
                        ).set_defaults(handler=cmd_expire)
    reembed = commands.add_parser("reembed", help="move every active fact to another "
                                                  "embedding model and dimension, while "
                                                  "workers run")
    reembed.add_argument("--model", required=True, help="the embeddings model moved to")
    reembed.add_argument("--dim", type=int, required=True, help="its dimension")
    reembed.add_argument("--batch", type=int, default=128, help="texts per embeddings call")
    reembed.set_defaults(handler=cmd_reembed)


def cmd_expire(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.expiry import expire_due
    from worker.store.maintenance import PostgresMaintenanceStore

    settings = resolve(settings)

    async def go() -> int:
        store = await PostgresMaintenanceStore.connect(settings.database_url or "", max_size=1)
        try:
            return await expire_due(store)
        finally:
            await store.aclose()

    print(json.dumps({"expired": asyncio.run(go())}))
    return 0


def cmd_reembed(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.reembed import Counts, Target, run_reembed

    def progress(counts: Counts) -> None:
        print(f"pass {counts.passes}: {counts.users} users moved, {counts.facts} facts,"
              f" {counts.notes} notes",
              file=sys.stderr, flush=True)

    settings = resolve(settings)
    outcome = asyncio.run(run_reembed(settings, Target(args.model, args.dim), batch=args.batch,
                                      progress=progress))
    print(outcome.line())
    return 0
