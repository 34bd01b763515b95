"""The portrait's word budget (worker.pipeline.portrait.words_for): never more than its
facts' own words and a few joins, within the setting and the wire's minimum."""

from __future__ import annotations

from worker.pipeline.portrait import PORTRAIT_SLACK_WORDS, words_for
from worker.providers.wire import MIN_PORTRAIT_WORDS
from worker.store.portraits import PortraitFact


def _facts(*texts: str) -> list[PortraitFact]:
    return [PortraitFact(id=i, text=t, category="fact") for i, t in enumerate(texts, 1)]


def test_a_few_facts_get_a_few_words() -> None:
    two = _facts("The user lives in Porto.", "The user works as a nurse.")
    assert words_for(two, 120) == 11 + PORTRAIT_SLACK_WORDS


def test_many_facts_get_the_setting_and_one_short_fact_the_minimum() -> None:
    many = _facts(*(f"The user has hobby number {i}." for i in range(40)))
    assert words_for(many, 120) == 120
    assert words_for(_facts("Vegan."), 120) == MIN_PORTRAIT_WORDS
