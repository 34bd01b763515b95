"""The end-to-end demo: `memfleet demo`."""

from __future__ import annotations

import argparse
import asyncio

from worker.cli.common import Commands, resolve
from worker.config import Settings


def register(commands: Commands) -> None:
    commands.add_parser("demo", help="run the end-to-end demo").set_defaults(handler=cmd_demo)


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.demo import run_demo
    from worker.telemetry import configure_logging

    # The worker's per-job log lines would break up the story the demo prints on
    # stdout; warnings still reach stderr.
    configure_logging("WARNING", http_requests=settings.log_http_requests)
    # The demo makes the embedded servers where none are, as `memfleet up` does.
    return asyncio.run(run_demo(resolve(settings, create=True)))
