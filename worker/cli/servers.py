"""The servers and the schema: `memfleet up`, `down` and `migrate`."""

from __future__ import annotations

import argparse
import asyncio
import sys

from worker.cli.common import Commands, resolve
from worker.config import Settings


def register(commands: Commands) -> None:
    commands.add_parser("up", help="make (first time) and start the embedded servers under "
                               "MEMFLEET_HOME_DIR, and print their URLs"
                        ).set_defaults(handler=cmd_up)
    commands.add_parser("down", help="stop the embedded servers").set_defaults(handler=cmd_down)
    commands.add_parser("migrate", help="apply schema/ (safe with many replicas at once)"
                        ).set_defaults(handler=cmd_migrate)


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    from worker.embedded import embedded_made

    fresh = not settings.database_url and not embedded_made(settings.home_dir.resolve(),
                                                            redis=False)
    settings = resolve(settings, create=True)
    print(f"MEMFLEET_DATABASE_URL={settings.database_url}")
    print(f"MEMFLEET_REDIS_URL={settings.redis_url}")
    if fresh:
        print("memfleet: the new database is empty: `memfleet migrate` applies the schema",
              file=sys.stderr)
    return 0


def cmd_down(settings: Settings, args: argparse.Namespace) -> int:
    from worker.embedded import embedded_running, stop_embedded

    home = settings.home_dir.resolve()
    if not any(embedded_running(home, postgres=p, redis=not p) for p in (True, False)):
        print(f"memfleet: no embedded server runs under {home}", file=sys.stderr)
        return 0
    stop_embedded(home)
    print("embedded servers stopped")
    return 0


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from worker.store.migrate import migrate

    settings = resolve(settings)
    applied = asyncio.run(migrate(
        settings.database_url or "", embed_dim=settings.embed_dim,
        pg_partitions=settings.pg_partitions))
    print("applied: " + ", ".join(applied) if applied else "schema is up to date")
    return 0
