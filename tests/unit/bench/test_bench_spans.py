"""The bench's "outside the LLM" counts model calls made side by side once."""

from __future__ import annotations

from bench.lib.spans import _union_ms


def test_calls_side_by_side_count_once() -> None:
    ms = 1_000_000
    assert _union_ms([]) == 0
    assert _union_ms([(0, 10 * ms)]) == 10
    # The summary (0-10) beside extraction (2-6) then consolidation (12-20).
    assert _union_ms([(12 * ms, 20 * ms), (0, 10 * ms), (2 * ms, 6 * ms)]) == 18
    assert _union_ms([(0, 5 * ms), (5 * ms, 9 * ms)]) == 9
    assert _union_ms([(0, 5 * ms), (3 * ms, 9 * ms)]) == 9
