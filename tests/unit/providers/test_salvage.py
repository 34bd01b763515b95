"""A cut-off extraction answer keeps its complete facts, each once (llm_json.salvage_items)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from worker.providers.llm_json import salvage_items
from worker.providers.wire import ConsolidationAnswer, ExtractionAnswer, SummaryAnswer

ZIG = {"text": "Uses Zig", "category": "preference", "importance": 6}
LYON = {"text": "Lives in Lyon", "category": "fact", "importance": 8}


def cut(items: list[dict[str, object]], tail: str = '{"text": "Uses Zi') -> str:
    return '{"facts": [' + ", ".join(json.dumps(i) for i in items) + ", " + tail


def texts(answer: ExtractionAnswer | None) -> list[str]:
    assert answer is not None
    return [fact.text for fact in answer.facts]


def test_a_runaway_keeps_each_complete_fact_once_in_order() -> None:
    answer = salvage_items(cut([ZIG, LYON] * 20), ExtractionAnswer)
    assert texts(answer) == ["Uses Zig", "Lives in Lyon"]


def test_the_item_being_written_at_the_cut_is_left_out() -> None:
    assert texts(salvage_items(cut([ZIG], json.dumps(LYON)[:-3]), ExtractionAnswer)) == [
        "Uses Zig"]


def test_nothing_complete_is_nothing() -> None:
    assert salvage_items('{"facts": [{"text": "the user the user the', ExtractionAnswer) is None
    assert salvage_items('{"facts": [', ExtractionAnswer) is None
    assert salvage_items("Sure, here are the facts", ExtractionAnswer) is None
    assert salvage_items(None, ExtractionAnswer) is None


def test_an_item_the_schema_refuses_is_skipped_not_the_answer() -> None:
    bad = {"text": "Likes tea", "category": "nonsense", "importance": 99}
    assert texts(salvage_items(cut([bad, LYON]), ExtractionAnswer)) == ["Lives in Lyon"]


def test_unknown_keys_on_an_item_are_dropped() -> None:
    chatty = {**ZIG, "reason": "said so", "confidence": 0.9}
    assert texts(salvage_items(cut([chatty]), ExtractionAnswer)) == ["Uses Zig"]


def test_a_bare_list_and_a_reasoning_block_are_read_through() -> None:
    bare = "[" + json.dumps(ZIG) + ", " + json.dumps(ZIG) + ', {"te'
    assert texts(salvage_items(bare, ExtractionAnswer)) == ["Uses Zig"]
    reasoned = "<think>{\"facts\": [bogus]}</think>" + cut([LYON])
    assert texts(salvage_items(reasoned, ExtractionAnswer)) == ["Lives in Lyon"]


def test_only_models_of_one_list_of_items_are_salvaged() -> None:
    # A summary is one text: half of it is not a summary.
    assert salvage_items('{"summary": "The user lives in Ly', SummaryAnswer) is None
    # Consolidation has one list too; the provider does not ask it (openai_chat.ChatPass),
    # but the function itself reads any such model's complete items.
    answer = salvage_items(
        '{"decisions": [{"candidate": 0, "event": "ADD", "target": null, "text": null}, {"cand',
        ConsolidationAnswer)
    assert answer is not None and len(answer.decisions) == 1


@given(st.text(max_size=300))
def test_any_text_gives_an_answer_or_none_never_an_error(text: str) -> None:
    answer = salvage_items(text, ExtractionAnswer)
    assert answer is None or answer.facts
