"""`memfleet --help` is enough to use a command: every option says what it is for, an
option with a fixed set of values lists them, log levels are taken in any case, and a
mistake on the command line is one `memfleet: ...` line and exit 2."""

from __future__ import annotations

import argparse

import pytest

from worker.cli.common import LOG_LEVELS
from worker.cli.main import build_parser, main

# The options whose values are a fixed set, by command: each must list them (choices).
FIXED_SETS = {"worker": {"log_level"}, "exporter": {"log_level"}, "webhook": {"log_level"},
              "facts": {"scope"}, "consent": {"action"}, "keys": {"action"},
              "eval": {"kind", "control"}, "shards": {"action"}, "mcp": {"log_level"}}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize(("name", "command"), _commands().items(), ids=list(_commands()))
def test_every_option_has_help(name: str, command: argparse.ArgumentParser) -> None:
    for action in _options(command):
        if action.dest == "handler":
            continue
        assert action.help and action.help.strip(), f"memfleet {name} {action.dest}: no help"


def test_every_option_with_a_fixed_set_of_values_lists_them() -> None:
    commands = _commands()
    for name, dests in FIXED_SETS.items():
        for action in _options(commands[name]):
            if action.dest in dests:
                assert action.choices, f"memfleet {name} {action.dest}: no choices"
                shown = commands[name].format_help()
                assert all(str(choice) in shown for choice in action.choices), name
    # And none is forgotten: every option listing choices is in the table.
    listed = {(name, a.dest) for name, command in commands.items()
              for a in _options(command) if a.choices}
    assert listed == {(name, dest) for name, dests in FIXED_SETS.items() for dest in dests}


@pytest.mark.parametrize("command", ["worker", "exporter", "webhook"])
@pytest.mark.parametrize("given", ["debug", "Debug", "DEBUG", "warning"])
def test_log_levels_are_taken_in_any_case(command: str, given: str) -> None:
    args = build_parser().parse_args([command, "--log-level", given])
    assert args.log_level == given.upper() and args.log_level in LOG_LEVELS


@pytest.mark.parametrize(("argv", "says"), [
    (["worker", "--log-level", "verbose"], "memfleet: worker: argument --log-level: invalid "
                                           "choice: 'VERBOSE'"),
    (["facts"], "memfleet: facts: the following arguments are required: --user"),
    (["nosuchcommand"], "memfleet: argument command: invalid choice: 'nosuchcommand'"),
    (["facts", "--user", "u", "--limit", "3"], "memfleet: facts: no option --limit (see"),
    # A typo names its command and the option it was likely meant to be.
    (["worker", "--brust"], "memfleet: worker: no option --brust: did you mean --burst? (see "
                            "`memfleet worker --help`)"),
    (["facts", "--user", "u", "--jsno"], "memfleet: facts: no option --jsno: did you mean "
                                         "--json?"),
    (["facts", "--user", "u", "--scpoe=profile"], "memfleet: facts: no option --scpoe: did you "
                                                 "mean --scope?"),
    (["facts", "--user", "u", "stray"], "memfleet: facts: unexpected arguments: stray (see"),
    (["wroker"], "memfleet: argument command: invalid choice: 'wroker': did you mean "
                 "'worker'? (see `memfleet --help`)"),
    (["keys", "craete"], "memfleet: keys: argument action: invalid choice: 'craete': did you "
                         "mean 'create'?"),
])
def test_a_command_line_mistake_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(says), err
    assert "--help`" in err
