"""bench.lib.prefix_cache: the common prefix and its share (bench.prompt_split)."""

from __future__ import annotations

import pytest

from bench.lib.prefix_cache import cacheable_share, common_prefix_bytes, render_prompt


@pytest.mark.parametrize(("a", "b", "expected"), [
    (b"", b"", 0),
    (b"", b"abc", 0),
    (b"abc", b"abc", 3),
    (b"abc", b"abcdef", 3),
    (b"abcdef", b"abc", 3),
    (b"abcdef", b"abXdef", 2),
    (b"xbc", b"abc", 0),
    (b"a" * 1000 + b"b", b"a" * 1000 + b"c", 1000),
])
def test_common_prefix_bytes(a: bytes, b: bytes, expected: int) -> None:
    assert common_prefix_bytes(a, b) == expected
    assert common_prefix_bytes(b, a) == expected


def test_common_prefix_counts_bytes_not_characters() -> None:
    # "é" is two UTF-8 bytes: the prefix ends inside the second character.
    assert common_prefix_bytes("éa".encode(), "éb".encode()) == 2
    assert common_prefix_bytes("é".encode(), "è".encode()) == 1


def test_the_share_leaves_turn_one_out_of_both_sums() -> None:
    share = cacheable_share([b"SYS-one", b"SYS-two!", b"SYS-two!more"])
    assert share.per_turn == (4, 8)
    assert share.prefix_bytes == 12
    assert share.prompt_bytes == 8 + 12
    assert share.share == pytest.approx(12 / 20)


def test_the_share_of_identical_and_of_disjoint_prompts() -> None:
    assert cacheable_share([b"same"] * 20).share == 1.0
    assert cacheable_share([b"a", b"b", b"c"]).share == 0.0


def test_a_single_turn_has_no_share() -> None:
    share = cacheable_share([b"only"])
    assert (share.prefix_bytes, share.prompt_bytes, share.per_turn, share.share) == \
        (0, 0, (), 0.0)


def test_render_prompt_keeps_the_order_and_drops_empty_system_parts() -> None:
    prompt = render_prompt(["persona", "", "facts"], [("user", "hi"), ("assistant", "hello")])
    assert prompt == b"[system]\npersona\n\nfacts\n\n[user]\nhi\n\n[assistant]\nhello"
    # A stable system prompt and a longer conversation: the whole earlier prompt is the
    # prefix.
    later = render_prompt(["persona", "", "facts"],
                          [("user", "hi"), ("assistant", "hello"), ("user", "again")])
    assert common_prefix_bytes(prompt, later) == len(prompt)
