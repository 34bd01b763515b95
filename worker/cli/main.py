"""memfleet's command line, assembled: each group module adds its commands, with their
handlers, in its ``register``; here they are put in one parser, settings are read once
and the handler's exit code is returned (2, with one ``memfleet: ...`` line, on a
mistake in the settings or the arguments).
"""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from worker.cli import dead_letters, demo, fleet, handover, maintenance, memory, servers
from worker.cli.common import Commands, Handler
from worker.config import Settings, settings_error
from worker.errors import MemfleetError

GROUPS = (servers, fleet, handover, memory, dead_letters, maintenance, demo)

# What `memfleet --help` says, and the order it lists the commands in: as it was
# before the commands had groups (what users know), not by group.
DESCRIPTION = """memfleet: long-term memory for chat products. Start the servers, run the
workers, hand a session over, and see, correct, export or erase what is remembered
about a user (every command: docs/cli.md).

Without MEMFLEET_DATABASE_URL and MEMFLEET_REDIS_URL, the embedded servers under
MEMFLEET_HOME_DIR (.memfleet/) are started or reused.
"""
LISTED = ("up", "down", "migrate", "worker", "exporter", "webhook", "enqueue", "facts",
          "runs", "retry", "export", "import", "expire", "consent", "reembed", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memfleet", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(commands)
    _list_in_order(commands)
    return parser


def _list_in_order(commands: Commands) -> None:
    """argparse lists commands in the order they were added: put them in LISTED's (one
    not listed goes last). argparse has no public way to, hence its private list."""
    def rank(name: str) -> int:
        return LISTED.index(name) if name in LISTED else len(LISTED)

    commands._choices_actions.sort(key=lambda action: rank(action.dest))
    parsers = sorted(commands.choices.items(), key=lambda item: rank(item[0]))
    commands.choices.clear()
    commands.choices.update(parsers)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
        handler: Handler = args.handler
        return handler(settings, args)
    except ValidationError as exc:
        print(f"memfleet: {settings_error(exc)}", file=sys.stderr)
    except MemfleetError as exc:
        print(f"memfleet: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
