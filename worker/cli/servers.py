"""The servers and the schema: `memfleet up`, `down` and `migrate`."""

from __future__ import annotations

import argparse
import asyncio

from worker.cli.common import Commands, resolve
from worker.config import Settings


def register(commands: Commands) -> None:
    commands.add_parser("up", help="start the embedded servers and print their URLs"
                        ).set_defaults(handler=cmd_up)
    commands.add_parser("down", help="stop the embedded servers").set_defaults(handler=cmd_down)
    commands.add_parser("migrate", help="apply schema/ (safe with many replicas at once)"
                        ).set_defaults(handler=cmd_migrate)


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    settings = resolve(settings)
    print(f"MEMFLEET_DATABASE_URL={settings.database_url}")
    print(f"MEMFLEET_REDIS_URL={settings.redis_url}")
    return 0


def cmd_down(settings: Settings, args: argparse.Namespace) -> int:
    from worker.embedded import stop_embedded

    stop_embedded(settings.home_dir.resolve())
    print("embedded servers stopped")
    return 0


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from worker.store.migrate import migrate

    settings = resolve(settings)
    applied = asyncio.run(migrate(settings.database_url or "", embed_dim=settings.embed_dim))
    print("applied: " + ", ".join(applied) if applied else "schema is up to date")
    return 0
