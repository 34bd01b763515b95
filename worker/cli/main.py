"""memfleet's command line, assembled: each group module adds its commands, with their
handlers, in its ``register``; here they are put in one parser, settings are read once
(the fleet's, worker.config.Settings, or those a command reads with its ``read_settings``)
and the handler's exit code is returned (2, with one ``memfleet: ...`` line, on a
mistake in the arguments or the settings, a server that cannot be used, or output
whose reader went away).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
from collections.abc import Callable
from typing import NoReturn

from pydantic import ValidationError

from worker.cli import (
    api,
    dead_letters,
    demo,
    dev,
    evaluation,
    fleet,
    handover,
    keys,
    maintenance,
    mcp,
    memory,
    servers,
    shards,
    typo,
)
from worker.cli.common import Commands, Handler
from worker.config import Settings, settings_error
from worker.errors import MemfleetError

GROUPS = (servers, fleet, api, mcp, handover, memory, dead_letters, maintenance, keys, demo,
          evaluation, shards, dev)

# What `memfleet --help` says, and the order it lists the commands in: as it was
# before the commands had groups (what users know), not by group.
DESCRIPTION = """memfleet: long-term memory for chat products. Start the servers, run the
workers, hand a session over, and see, correct, export or erase what is remembered
about a user (every command: docs/cli.md).

Without MEMFLEET_DATABASE_URL and MEMFLEET_REDIS_URL, commands use the embedded
servers under MEMFLEET_HOME_DIR (.memfleet/): `memfleet up` makes and starts them,
`memfleet down` stops them.
"""
LISTED = ("dev", "up", "down", "migrate", "worker", "exporter", "webhook", "api", "mcp", "enqueue",
          "facts", "runs", "retry", "export", "import", "expire", "consent", "reembed", "keys",
          "token", "demo", "eval", "shards")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose mistakes end as every other: one line, exit 2 (argparse
    prints its usage before the error, which buries the error in a long command), naming
    the command and, for a mistyped option or command, the nearest one it has."""

    def parse_command_line(self, argv: list[str] | None) -> argparse.Namespace:
        """parse_args, but options no command knows are reported by that command:
        argparse reports them from the top parser, which knows neither the command they
        were given to nor its options."""
        parsed, extras = self.parse_known_args(argv)
        if extras:
            command = self._command_parser(getattr(parsed, "command", None))
            (command or self).error(typo.unrecognized(extras, _option_strings(command)))
        return parsed

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("memfleet").strip()
        message = typo.with_nearest_choice(message)
        said = f"{command}: {message}" if command else message
        self.exit(2, f"memfleet: {said} (see `{self.prog} --help`)\n")

    def _command_parser(self, name: str | None) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                command: argparse.ArgumentParser = action.choices[name]
                return command
        return None


def _option_strings(parser: argparse.ArgumentParser | None) -> list[str]:
    return [] if parser is None else [o for a in parser._actions for o in a.option_strings]


def build_parser() -> Parser:
    parser = Parser(prog="memfleet", description=DESCRIPTION)
    # Each command's parser is a Parser too (argparse makes them of the parent's class).
    commands: Commands = parser.add_subparsers(  # type: ignore[assignment]
        dest="command", required=True)
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
    try:
        return _run(argv)
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # another pipe or socket: not the reader of the output
        # Python's recipe (docs of signal, "Note on SIGPIPE"): what is left in the buffer
        # goes to /dev/null, or flushing it at exit raises again.
        _discard_stdout()
        # Exit 2 and a line, not the silence of a SIGPIPE death: a cut-short export or
        # listing must not pass for a whole one; after `| head` the line says it is fine.
        return _fail("the output was cut short: its reader closed the pipe (fine after "
                     "`| head`; otherwise read the whole output)")


def _run(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_command_line(argv)
    finally:
        sys.stdout.flush()  # --help into a closed pipe fails here, not at exit
    try:
        # The fleet's settings, or those the command reads instead (`memfleet api`'s).
        read_settings: Callable[[], Settings] = getattr(args, "read_settings", Settings)
        settings = read_settings()
        handler: Handler = args.handler
        code = handler(settings, args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except ValidationError as exc:
        return _fail(settings_error(exc))
    except MemfleetError as exc:
        return _fail(str(exc))


def _fail(message: str) -> int:
    """One ``memfleet: ...`` line; what an error carries beyond its first line (an embedded
    server's log tail) follows it indented, as details rather than more errors."""
    first, *details = message.splitlines() or [""]
    with contextlib.suppress(OSError):  # stderr gone too: the exit code says it
        print(f"memfleet: {first}", *(f"  {line}" for line in details), sep="\n",
              file=sys.stderr, flush=True)
    return 2


def _stdout_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no descriptor (captured) or no poll
        return False


def _discard_stdout() -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
