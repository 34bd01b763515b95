"""The debounce decision of the user's portrait (worker.protocol.portrait_queue): when
the next refresh is due, from the last refresh's start and the commits since."""

from __future__ import annotations

import pytest

from worker.protocol.portrait_queue import MS_PER_MINUTE, PortraitPace, refresh_due_ms

PACE = PortraitPace(min_interval_ms=10 * MS_PER_MINUTE, max_commits=3)
NOW = 1_000_000_000


def test_a_first_portrait_is_due_at_once() -> None:
    assert refresh_due_ms(NOW, None, 1, PACE) == NOW


def test_within_the_interval_the_refresh_waits_for_its_end() -> None:
    last = NOW - 4 * MS_PER_MINUTE
    assert refresh_due_ms(NOW, last, 1, PACE) == last + 10 * MS_PER_MINUTE
    assert refresh_due_ms(NOW, last, 2, PACE) == last + 10 * MS_PER_MINUTE


def test_after_the_interval_it_is_due_at_once() -> None:
    assert refresh_due_ms(NOW, NOW - 10 * MS_PER_MINUTE, 1, PACE) == NOW
    assert refresh_due_ms(NOW, NOW - 60 * MS_PER_MINUTE, 1, PACE) == NOW


@pytest.mark.parametrize("commits", [3, 4, 50])
def test_max_commits_since_the_last_bring_it_forward(commits: int) -> None:
    assert refresh_due_ms(NOW, NOW - MS_PER_MINUTE, commits, PACE) == NOW


def test_no_interval_means_every_commit_is_due_at_once() -> None:
    pace = PortraitPace.of(0, 20)
    assert refresh_due_ms(NOW, NOW - 1, 1, pace) == NOW


def test_the_settings_are_minutes() -> None:
    assert PortraitPace.of(0.5, 7) == PortraitPace(30_000, 7)
