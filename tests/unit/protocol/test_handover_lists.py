"""A session's older lists (the backlog) and its latest one: which list a run
takes and what it settles.

The same rules run on real Redis and PostgreSQL in
tests/integration/handover/test_handover_backlog.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from opentelemetry.trace import NoOpTracer

from worker.config import Settings
from worker.errors import InvalidJob
from worker.pipeline.cursor import CursorCase, Settlement, choose, window_hash
from worker.pipeline.run import RunContext, run_once
from worker.protocol.lock import Claimed
from worker.protocol.payload import Handover, Message, Snapshot
from worker.providers.factory import build_providers
from worker.store.types import CursorState
from worker.telemetry import StageClock
from worker.testing.in_memory_store import InMemoryStore

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SETTINGS = Settings(embed_dim=64, summary_every_user_turns=100)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def snapshot(seq: int, *texts: str, latest: bool = False, user_id: str = "u1") -> Snapshot:
    messages = tuple(user(t) for t in texts)
    return Snapshot(seq, Handover(session_id="s1", user_id=user_id, messages=messages,
                                  handed_over_at=NOW), latest)


def cursor_at_end(of: Snapshot, *, seq: int | None = None) -> CursorState:
    """The cursor as a commit of ``of``'s last slice leaves it."""
    from worker.protocol.payload import message_hash

    hashes = [message_hash(m) for m in of.handover.messages]
    end = len(hashes) - 1
    return CursorState(session_id="s1", user_id="u1", version=1, last_hash=hashes[end],
                       window_hash=window_hash(hashes, end), position=end,
                       processed_count=end + 1, user_turns_since_summary=0, summary=None,
                       handover_seq=of.seq if seq is None else seq)


# ---------------------------------------------------------------- choosing the list

def test_an_older_list_goes_first_and_its_end_asks_for_a_follow_up() -> None:
    older, latest = snapshot(5, "a", "b"), snapshot(9, "summary", "c", latest=True)
    position = choose([older, latest], None, max_messages=50)
    assert position.snapshot is older
    assert (position.piece.start, position.piece.end) == (0, 2)
    assert position.settlement() == Settlement(5, 0, follow_up=True)
    assert position.advance(older.handover).handover_seq == 5


def test_once_an_older_list_is_done_the_latest_one_is_taken_whole() -> None:
    older, latest = snapshot(5, "a", "b"), snapshot(9, "summary", "c", latest=True)
    position = choose([older, latest], cursor_at_end(older), max_messages=50)
    assert position.snapshot is latest
    assert position.case is CursorCase.NOT_FOUND  # the summary replaced what the cursor names
    assert position.settlement() == Settlement(9, 9, follow_up=False)


def test_an_older_list_below_the_cursors_number_is_never_read_again() -> None:
    # The cursor moved in list 9; list 5 stayed in Redis (its drop was lost). Read
    # again, it would not find the cursor and would replay everything it says.
    older, latest = snapshot(5, "I use Vim."), snapshot(9, "I no longer use Vim.", latest=True)
    position = choose([older, latest], cursor_at_end(latest), max_messages=50)
    assert position.snapshot is latest
    assert position.piece.empty
    assert position.settlement() == Settlement(9, 9, follow_up=False)


def test_the_latest_list_is_located_whatever_its_number() -> None:
    # A latest list numbered below the cursor's (Redis lost its counter and the clock
    # went back) is still read: only older lists are passed over by number.
    latest = snapshot(3, "a", "b", latest=True)
    cursor = cursor_at_end(snapshot(3, "a"), seq=9)
    position = choose([latest], cursor, max_messages=50)
    assert (position.case, position.piece.start, position.piece.end) == (CursorCase.FOUND, 1, 2)


def test_a_long_older_list_goes_in_slices_and_settles_nothing_until_done() -> None:
    done, long, latest = snapshot(2, "x"), snapshot(5, *"abcde"), snapshot(9, "z", latest=True)
    position = choose([done, long, latest], cursor_at_end(done), max_messages=2)
    assert position.snapshot is long
    assert position.settlement() == Settlement(2, 0, follow_up=True)


def test_an_older_list_of_another_user_is_refused() -> None:
    theirs = snapshot(5, "I use Emacs.", user_id="mallory")
    ours = snapshot(9, "I use Vim.", latest=True)
    with pytest.raises(InvalidJob, match="another user"):
        choose([theirs, ours], cursor_at_end(snapshot(1, "hi")), max_messages=50)


def test_a_latest_list_of_another_user_is_refused() -> None:
    with pytest.raises(InvalidJob, match="another user"):
        choose([snapshot(9, "hi", latest=True, user_id="mallory")],
               cursor_at_end(snapshot(1, "hi")), max_messages=50)


def test_claimed_lists_come_oldest_first_and_unreadable_numbers_sort_first() -> None:
    claimed = Claimed(b"{latest}", True, seq=9, backlog=(b"5:{five}", b"garbage", b"7:{seven}"))
    assert [(r.seq, r.payload, r.latest) for r in claimed.lists()] == [
        (5, b"{five}", False), (0, b"garbage", False), (7, b"{seven}", False),
        (9, b"{latest}", True),
    ]


# ---------------------------------------------------------------- the pipeline over lists

async def test_messages_only_an_older_list_holds_are_remembered_in_order() -> None:
    store = InMemoryStore()
    ctx = RunContext(SETTINGS, store, build_providers(SETTINGS), StageClock(NoOpTracer()),
                     job_id="j1", job_try=1, started_at=NOW)
    # Handed over while no worker ran; then the chat server summarised its history.
    lists = [snapshot(5, "I live in Paris.", "I use Vim."),
             snapshot(9, "Summary: lives in Paris.", "I moved to Lyon.", latest=True)]
    outcomes = []
    while True:
        result = await run_once(ctx, lists)
        outcomes.append(result.outcome)
        settled = result.settlement
        # What the lock's release drops from the backlog.
        lists = [s for s in lists if s.latest or s.seq > settled.done_through]
        if not settled.follow_up:
            break
    assert outcomes == ["committed", "committed"]
    assert sorted(f.text for f in await store.facts("u1")) == ["Lives in Lyon", "Uses Vim"]
    # A replay of the older list (its drop lost) changes nothing.
    again = await run_once(ctx, [snapshot(5, "I live in Paris.", "I use Vim."), lists[-1]])
    assert again.outcome == "empty"
    assert sorted(f.text for f in await store.facts("u1")) == ["Lives in Lyon", "Uses Vim"]
