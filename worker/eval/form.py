"""What the suite counts as a fact: one claim, short, about the user in the third person.

A memory that stores what was said verbatim ("Big news: I moved to Madrid and I
started at Acme.") holds the words every gold assertion looks for; counting such a
row as a remembered fact would make a raw dump score like a memory. So a row
satisfies a positive check (``active``, ``chains``, ``ended``: worker.eval.score)
only when it is **well-formed**, that is, all of:

- **short**: at most ``MAX_WORDS`` words (a word: a run of letters or digits);
- **one sentence**: no sentence end (``.``, ``!`` or ``?``) followed by more words,
  no ``;``, no line break;
- **no joined clauses**: no comma followed by a coordinating conjunction (``, and``,
  ``, but``, ``, so``, ``, or``; ``, und``/``, aber``; ``, y``/``, pero``; ``, et``/
  ``, mais``), and no conjunction followed by a new subject (``and I``, ``but she``,
  ``and the user``): "Likes tea and coffee" is one claim, "Lives in Oslo, and works
  at Equinor" is two;
- **third person**: no first-person word (``I``, ``I'm``, ``me``, ``my``, ``mine``,
  ``myself``, ``we``, ``we've``, ``our``; German ``ich``, ``mich``, ``mir``, ``mein*``; Spanish
  ``yo``, ``mi``, ``mis``, ``me``, ``conmigo``; French ``je``, ``j'``, ``moi``,
  ``mon``, ``ma``, ``mes``, ``m'``), as memfleet's extraction prompt asks and mem0's
  examples are written ("Name is John"). A quoted nickname is text too: a fact that
  quotes the user's own words in the first person is not well-formed.

A row that is not well-formed still counts against ``absent`` checks: whatever a
memory returns is read by the chat server, whatever its shape.
"""

from __future__ import annotations

import re

MAX_WORDS = 20

_APOSTROPHES = "'\u2019"  # ' and the typographic one
_WORD = re.compile(rf"[^\W_]+(?:[{_APOSTROPHES}][^\W_]+)?")
_SENTENCES = re.compile(r"[.!?][\"')\]]*\s+\S|;|\n")
_JOINED = re.compile(
    r",\s*(?:and|but|so|or|und|aber|y|pero|et|mais)\b"
    r"|\b(?:and|but|so|und|aber|y|pero|et|mais)\s+(?:then\s+)?"
    r"(?:i|he|she|they|we|the user|ich|er|sie|yo|je|il|elle)\b",
    re.IGNORECASE)
_A = _APOSTROPHES
_FIRST_PERSON = re.compile(
    rf"(?<![\w{_A}])(?:i|i[{_A}](?:m|ve|d|ll)|me|my|mine|myself|we|we[{_A}](?:re|ve|d|ll)"
    r"|our|ours|us"
    r"|ich|mich|mir|mein|meine|meinen|meinem|meiner|meines"
    rf"|yo|mi|mis|conmigo|je|moi|mon|ma|mes)(?![\w{_A}])"
    rf"|(?<![\w{_A}])[jm][{_A}](?=\w)",
    re.IGNORECASE)


def words(text: str) -> int:
    return len(_WORD.findall(text))


def fault(text: str) -> str | None:
    """Why the text is not a well-formed fact, or None when it is one."""
    body = text.strip()
    if not body:
        return "empty"
    count = words(body)
    if count > MAX_WORDS:
        return f"{count} words (at most {MAX_WORDS})"
    if _SENTENCES.search(body.rstrip(".!? ")):
        return "more than one sentence"
    joined = _JOINED.search(body)
    if joined:
        return f"joined clauses ({joined[0].strip()!r})"
    first = _FIRST_PERSON.search(body)
    if first:
        return f"first person ({first[0]!r})"
    return None


def well_formed(text: str) -> bool:
    return fault(text) is None
