"""Cursor stage: find where the new messages start. Pure, but for reading the cursor.

The cursor names the last processed message by its content hash,
``sha256("role:content")`` (docs/architecture.md, "The cursor"), plus two
checks that make it name one position without doubt when messages repeat
("ok", "Thanks!"):

- ``window_hash``: the content hashes of the last WINDOW messages ending at
  the cursor, joined with "|", so a repeated "ok" only matches where its
  neighbours match too. Kept as the hashes themselves (not one hash of them)
  so that a list that starts inside that window (a long session handed over
  as its most recent window, worker.protocol.payload.recent_window) can still be
  checked on the part it holds; such a partial match counts only where no
  full one exists. Cursors written before kept sha256 of the joined hashes,
  which still matches in full;
- ``position``: the index it had. In an append-only history the match at that
  index is the one; when the chat server summarised the history, indexes
  shift and the window decides.

When several places still match (a whole window repeated), the earliest wins:
reprocessing a few messages costs a consolidation NONE, skipping them would
lose facts.

A session may hold older lists besides its latest one (worker.protocol.queue: the chat
server replaced its history before a commit finished them). The run takes the
first list, oldest first, with something after the cursor. A backlog list
numbered below the cursor's ``handover_seq`` is finished (lists are taken in
order), even when Redis failed to drop it; the latest list is always located.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from worker.conversation import Handover, Message, Snapshot, message_hash
from worker.errors import InvalidJob
from worker.pipeline.context import RunContext
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
    """The content hashes of messages ``end-WINDOW+1 .. end`` (inclusive), joined."""
    return "|".join(hashes[max(0, end - WINDOW + 1) : end + 1])


def _window_matches(hashes: Sequence[str], end: int, stored: str, *, partial: bool) -> bool:
    here = hashes[max(0, end - WINDOW + 1) : end + 1]
    joined = "|".join(here)
    if joined == stored or hashlib.sha256(joined.encode()).hexdigest() == stored:
        return True
    # The list starts inside the stored window: check the part it holds.
    return partial and end + 1 < WINDOW and stored.endswith("|" + joined)


def locate(hashes: Sequence[str], cursor: CursorState | None) -> Located:
    if cursor is None:
        return Located(CursorCase.NONE, 0)
    matches: list[int] = []
    for partial in (False, True):
        matches = [i for i, h in enumerate(hashes) if h == cursor.last_hash
                   and _window_matches(hashes, i, cursor.window_hash, partial=partial)]
        if matches:
            break
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
class Settlement:
    """What a run leaves for Redis to tidy (at the lock's release) and whether more is due."""

    done_through: int  # backlog lists numbered up to this are finished
    latest_done: int  # the latest list's number when the run finished it, else 0
    follow_up: bool  # the rest of this list, or a later one, waits for another job


NOTHING_SETTLED = Settlement(0, 0, follow_up=False)


@dataclass(frozen=True, slots=True)
class Position:
    """Where this run stands in the session: the cursor read, the list and the slice."""

    hashes: list[str]
    cursor: CursorState | None
    case: CursorCase
    piece: Slice
    snapshot: Snapshot
    later: int = 0  # lists after this one
    done_before: int = 0  # the number of the last finished list before this one (0: none)
    remember: bool = True  # the user's consent: False, the slice is passed over as opted_out

    @property
    def handover(self) -> Handover:
        return self.snapshot.handover

    def settlement(self) -> Settlement:
        """After this slice moved the cursor (or there was nothing to move)."""
        if self.piece.remaining:
            return Settlement(self.done_before, 0, follow_up=True)
        seq = self.snapshot.seq
        return Settlement(seq, seq if self.snapshot.latest else 0, follow_up=self.later > 0)

    def new_messages(self, handover: Handover) -> Sequence[Message]:
        return handover.messages[self.piece.start : self.piece.end]

    def unsummarised_messages(self, handover: Handover) -> Sequence[Message]:
        """The slice, and before it the user turns no summary has read yet (the cursor's
        count since the last refresh), as far back as this list still holds them: a
        refresh reads every turn since the previous one, not only the last slice."""
        start = self.piece.start
        owed = self.cursor.user_turns_since_summary if self.cursor is not None else 0
        while owed > 0 and start > 0:
            start -= 1
            owed -= handover.messages[start].role == "user"
        return handover.messages[start : self.piece.end]

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
            handover_seq=self.snapshot.seq, fence_seq=self.snapshot.fence_seq,
        )

    def describe(self, run: RunRecord) -> RunRecord:
        """The audit row's slice columns."""
        return replace(run, slice_first_hash=self.hashes[self.piece.start],
                       slice_last_hash=self.hashes[self.piece.end - 1],
                       slice_len=self.piece.end - self.piece.start)


def choose(snapshots: Sequence[Snapshot], cursor: CursorState | None,
           max_messages: int) -> Position:
    """The first list, oldest first, with messages after the cursor, and its slice;
    the last list (empty slice) when every list is finished."""
    if not snapshots:
        raise ValueError("choose needs at least one list")
    floor = cursor.handover_seq if cursor is not None else 0
    done_before = 0
    for index, snapshot in enumerate(snapshots):
        last = index == len(snapshots) - 1
        if not snapshot.latest and snapshot.seq < floor and not last:
            done_before = snapshot.seq
            continue
        if cursor is not None and cursor.user_id != snapshot.handover.user_id:
            # Sessions are keyed by (user, session) in Redis and PostgreSQL alike.
            raise InvalidJob("a list of the session names another user")
        hashes = [message_hash(m) for m in snapshot.handover.messages]
        located = locate(hashes, cursor)
        piece = take_slice(len(hashes), located.start, max_messages)
        if piece.empty and not last:
            done_before = snapshot.seq
            continue
        return Position(hashes, cursor, located.case, piece, snapshot,
                        later=len(snapshots) - index - 1, done_before=done_before)
    raise AssertionError("unreachable: the last list always returns")


async def run(ctx: RunContext, snapshots: Sequence[Snapshot]) -> Position:
    """Read the session's cursor and find the list and slice this run processes."""
    with ctx.clock.stage("cursor") as span:
        latest = snapshots[-1].handover
        read = await ctx.store.load_session(latest.user_id, latest.session_id)
        position = choose(snapshots, read.cursor, ctx.settings.max_slice_messages)
        remember = (ctx.settings.memory_default if read.memory_enabled is None
                    else read.memory_enabled)
        if not remember:
            position = replace(position, remember=False)
            span.set_attribute("memfleet.opted_out", True)
        span.set_attribute("memfleet.cursor.case", position.case.value)
        span.set_attribute("memfleet.slice.length", position.piece.end - position.piece.start)
        span.set_attribute("memfleet.handover.lists", len(snapshots))
    return position
