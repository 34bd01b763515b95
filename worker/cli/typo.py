"""What a mistyped command line is told: the nearest option or command it may have meant
(argparse names neither before Python 3.14's suggest_on_error)."""

from __future__ import annotations

import difflib
import re

# argparse's words for a value outside an argument's choices (Python 3.11 to 3.13).
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")
_CLOSE = 0.6  # difflib's default cut-off: "--brust" -> "--burst", "wroker" -> "worker"


def nearest(given: str, known: list[str]) -> str | None:
    found = difflib.get_close_matches(given, known, n=1, cutoff=_CLOSE)
    return found[0] if found else None


def unrecognized(extras: list[str], options: list[str]) -> str:
    """The words for arguments the command does not take: the first option with the
    nearest one the command has, or the stray values."""
    for extra in extras:
        if extra.startswith("-") and len(extra) > 1:
            option = extra.split("=", 1)[0]
            guess = nearest(option, options)
            hint = f": did you mean {guess}?" if guess else ""
            return f"no option {option}{hint}"
    return "unexpected arguments: " + " ".join(extras)


def with_nearest_choice(message: str) -> str:
    """argparse's invalid-choice message, with the nearest choice in place of the list
    of them all when one is near."""
    found = _INVALID_CHOICE.search(message)
    if not found:
        return message
    guess = nearest(found.group(1), re.findall(r"'([^']*)'", found.group(2)))
    if guess is None:
        return message
    return f"{message[:found.start()]}invalid choice: '{found.group(1)}': did you mean '{guess}'?"
