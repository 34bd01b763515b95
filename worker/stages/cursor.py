"""Cursor stage: find where the new messages start. Pure, but for reading the cursor.

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
from dataclasses import dataclass, replace
from enum import StrEnum

from worker.errors import InvalidJob
from worker.payload import Handover, Message, message_hash
from worker.stages.context import RunContext
from worker.store.types import CursorAdvance, CursorState, RunRecord

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


@dataclass(frozen=True, slots=True)
class Position:
    """Where this run stands in the session: the cursor read, and the slice to process."""

    hashes: list[str]
    cursor: CursorState | None
    case: CursorCase
    piece: Slice

    def new_messages(self, handover: Handover) -> Sequence[Message]:
        return handover.messages[self.piece.start : self.piece.end]

    def user_turns(self, handover: Handover) -> int:
        return sum(1 for m in self.new_messages(handover) if m.role == "user")

    def advance(self, handover: Handover, summary: str | None = None) -> CursorAdvance:
        """The cursor move that marks the slice done (the persist transaction's fence)."""
        end = self.piece.end
        return CursorAdvance(
            session_id=handover.session_id, user_id=handover.user_id,
            expected_version=self.cursor.version if self.cursor else 0,
            last_hash=self.hashes[end - 1], window_hash=window_hash(self.hashes, end - 1),
            position=end - 1, processed=end - self.piece.start,
            user_turns=self.user_turns(handover), summary=summary,
        )

    def describe(self, run: RunRecord) -> RunRecord:
        """The audit row's slice columns."""
        return replace(run, slice_first_hash=self.hashes[self.piece.start],
                       slice_last_hash=self.hashes[self.piece.end - 1],
                       slice_len=self.piece.end - self.piece.start)


async def run(ctx: RunContext, handover: Handover) -> Position:
    """Read the session's cursor and find the slice this run processes."""
    with ctx.clock.stage("cursor") as span:
        hashes = [message_hash(m) for m in handover.messages]
        cursor = await ctx.store.load_cursor(handover.session_id)
        if cursor is not None and cursor.user_id != handover.user_id:
            raise InvalidJob("the session belongs to another user")
        located = locate(hashes, cursor)
        piece = take_slice(len(hashes), located.start, ctx.settings.max_slice_messages)
        span.set_attribute("memfleet.cursor.case", located.case.value)
        span.set_attribute("memfleet.slice.length", piece.end - piece.start)
    return Position(hashes, cursor, located.case, piece)
