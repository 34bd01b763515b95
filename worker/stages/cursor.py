"""Cursor stage: find where the new messages start. Pure.

The cursor names the last processed message by its content hash,
``sha256("role:content")`` (design.md), plus two checks that make it name one
position without doubt when messages repeat ("ok", "Thanks!"):

- ``window_hash``: a hash over the content hashes of the last WINDOW messages
  ending at the cursor, so a repeated "ok" only matches where its neighbours
  match too;
- ``position``: the index it had. In an append-only history the match at that
  index is the one; when the chat server summarised the history, indexes
  shift and the window decides.

When several places still match (a whole window repeated), the earliest wins:
reprocessing a few messages costs a consolidation NONE, skipping them would
lose facts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from worker.store.types import CursorState

WINDOW = 4


class CursorCase(StrEnum):
    NONE = "none"          # first run: process everything
    FOUND = "found"        # process what follows the cursor
    NOT_FOUND = "not_found"  # the history was summarised: process the whole current list


@dataclass(frozen=True, slots=True)
class Located:
    case: CursorCase
    start: int  # index of the first new message


def window_hash(hashes: Sequence[str], end: int) -> str:
    """Hash of the content hashes of messages ``end-WINDOW+1 .. end`` (inclusive)."""
    window = hashes[max(0, end - WINDOW + 1) : end + 1]
    return hashlib.sha256("|".join(window).encode()).hexdigest()


def locate(hashes: Sequence[str], cursor: CursorState | None) -> Located:
    if cursor is None:
        return Located(CursorCase.NONE, 0)
    matches = [
        i
        for i, h in enumerate(hashes)
        if h == cursor.last_hash and window_hash(hashes, i) == cursor.window_hash
    ]
    if not matches:
        return Located(CursorCase.NOT_FOUND, 0)
    at = cursor.position if cursor.position in matches else matches[0]
    return Located(CursorCase.FOUND, at + 1)


@dataclass(frozen=True, slots=True)
class Slice:
    start: int
    end: int  # exclusive
    remaining: int  # messages after ``end`` left for a follow-up job

    @property
    def empty(self) -> bool:
        return self.end <= self.start


def take_slice(total: int, start: int, max_messages: int) -> Slice:
    """The chunk this run processes; a long backlog is done in bounded chunks."""
    end = min(total, start + max_messages)
    return Slice(start, end, total - end)
