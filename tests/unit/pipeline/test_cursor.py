from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker.pipeline.cursor import CursorCase, locate, take_slice, window_hash
from worker.protocol.payload import Message, message_hash
from worker.store.types import CursorState


def hashes_of(texts: list[str]) -> list[str]:
    return [message_hash(Message(role="user", content=t)) for t in texts]


def cursor_at(hashes: list[str], index: int) -> CursorState:
    return CursorState(
        session_id="s", user_id="u", version=1, last_hash=hashes[index],
        window_hash=window_hash(hashes, index), position=index, processed_count=index + 1,
        user_turns_since_summary=0, summary=None,
    )


def test_the_hash_is_sha256_of_role_and_content() -> None:
    import hashlib

    expected = hashlib.sha256(b"user:hello").hexdigest()
    assert message_hash(Message(role="user", content="hello")) == expected


def test_no_cursor_processes_everything() -> None:
    assert locate(hashes_of(["a", "b"]), None).start == 0
    assert locate(hashes_of(["a", "b"]), None).case is CursorCase.NONE


def test_found_cursor_processes_what_follows() -> None:
    before = hashes_of(["a", "b", "c"])
    after = hashes_of(["a", "b", "c", "d", "e"])
    located = locate(after, cursor_at(before, 2))
    assert located.case is CursorCase.FOUND
    assert located.start == 3


def test_repeated_messages_resolve_to_the_processed_position() -> None:
    texts = ["hi", "ok", "thanks", "ok", "thanks", "ok"]
    before = hashes_of(texts[:4])  # processed up to the second "ok"
    after = hashes_of(texts)
    located = locate(after, cursor_at(before, 3))
    assert located.start == 4


def test_summarised_history_keeps_the_recent_window() -> None:
    processed = ["one", "two", "three", "four", "five", "six"]
    before = hashes_of(processed)
    # The chat server replaced the first messages by a summary and kept the tail.
    summarised = ["[summary of earlier turns]", "three", "four", "five", "six", "seven"]
    located = locate(hashes_of(summarised), cursor_at(before, 5))
    assert located.case is CursorCase.FOUND
    assert located.start == 5


def test_cursor_missing_from_history_means_process_all() -> None:
    before = hashes_of(["one", "two", "three"])
    located = locate(hashes_of(["[summary]", "four"]), cursor_at(before, 2))
    assert located.case is CursorCase.NOT_FOUND
    assert located.start == 0


def test_the_role_is_part_of_the_identity() -> None:
    user = [message_hash(Message(role="user", content="ok"))]
    bot = [message_hash(Message(role="assistant", content="ok"))]
    assert locate(bot, cursor_at(user, 0)).case is CursorCase.NOT_FOUND


def test_take_slice_bounds_a_backlog() -> None:
    piece = take_slice(total=10_000, start=0, max_messages=60)
    assert (piece.start, piece.end, piece.remaining) == (0, 60, 9_940)
    assert take_slice(total=5, start=5, max_messages=60).empty


@given(st.lists(st.sampled_from(["ok", "thanks", "yes", "no"]), min_size=1, max_size=30),
       st.data())
def test_append_only_history_never_skips_or_repeats(texts: list[str], data: st.DataObject) -> None:
    # Whatever repeats, a cursor at i over a longer append-only list resumes at i + 1.
    i = data.draw(st.integers(min_value=0, max_value=len(texts) - 1))
    extra = data.draw(st.lists(st.sampled_from(["ok", "thanks"]), max_size=5))
    before = hashes_of(texts[: i + 1])
    after = hashes_of(texts + extra)
    assert locate(after, cursor_at(before, i)).start == i + 1


def test_a_list_that_starts_inside_the_cursors_window_still_finds_it() -> None:
    # A long session handed over as its most recent window: the cursor's message
    # has fewer predecessors in the new list than its window holds.
    before = hashes_of(["a", "ok", "b", "ok", "c", "ok"])
    after = hashes_of(["c", "ok", "d", "ok"])
    located = locate(after, cursor_at(before, 5))
    assert (located.case, located.start) == (CursorCase.FOUND, 2)


def test_a_partial_match_only_counts_where_no_full_one_exists() -> None:
    before = hashes_of(["a", "ok", "b", "ok"])
    # "ok" at 1 matches the cursor's window in part; "ok" at 5 matches it in full.
    after = hashes_of(["b", "ok", "x", "a", "ok", "b", "ok", "y"])
    located = locate(after, cursor_at(before, 3))
    assert (located.case, located.start) == (CursorCase.FOUND, 7)


def test_a_partial_window_that_disagrees_is_no_match() -> None:
    before = hashes_of(["a", "ok", "b", "ok"])
    assert locate(hashes_of(["x", "ok", "z"]), cursor_at(before, 3)).case is CursorCase.NOT_FOUND


def test_a_cursor_written_with_a_hashed_window_still_matches_in_full() -> None:
    import hashlib

    hashes = hashes_of(["a", "ok", "b", "ok"])
    old = cursor_at(hashes, 3)
    legacy = CursorState(**{**{f: getattr(old, f) for f in old.__dataclass_fields__},
                            "window_hash": hashlib.sha256(old.window_hash.encode()).hexdigest()})
    assert locate([*hashes, *hashes_of(["c"])], legacy).start == 4
