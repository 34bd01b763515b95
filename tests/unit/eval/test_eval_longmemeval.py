"""LongMemEval's items as eval scenarios (worker.eval.longmemeval): pure conversion."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from worker.errors import MemfleetError
from worker.eval.longmemeval import convert, distinctive_words, load_longmemeval, parse_date
from worker.eval.run import plan_steps

FIXTURE = Path(__file__).parents[2] / "fixtures" / "longmemeval_small.json"


def _items() -> list[dict[str, Any]]:
    raw: list[dict[str, Any]] = json.loads(FIXTURE.read_text("utf-8"))
    return raw


def test_dates_are_read_as_longmemeval_writes_them() -> None:
    assert parse_date("2023/05/20 (Sat) 02:21") == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert parse_date("2023/05/20") == datetime(2023, 5, 20, tzinfo=UTC)
    with pytest.raises(ValueError, match="not a date"):
        parse_date("May 20, 2023")


@pytest.mark.parametrize(("answer", "words"), [
    ("Lisbon", ("Lisbon",)),
    ("Learning Portuguese", ("Learning", "Portuguese")),
    ("6 weeks", ("6", "weeks")),
    ("$400,000", ("400,000",)),
    ("It was the blue one, in the garage.", ("blue", "garage")),
    ("7 days. 8 days (including the last day) is also acceptable.", ("7", "days", "8", "last")),
    ("a b c d e f g h i j k", ()),
    ("one two three four five six seven", ("two", "three", "four", "five")),
])
def test_an_answer_is_found_by_its_distinctive_words(answer: str, words: tuple[str, ...]) -> None:
    assert distinctive_words(answer) == words


def test_only_knowledge_updates_and_temporal_items_are_taken_and_the_rest_counted() -> None:
    loaded = convert(_items(), limit=None, others=1)
    assert [s.id for s in loaded.scenarios] == ["lme-ku_city_01", "lme-ku_editor_02",
                                                "lme-tr_first_03", "lme-tr_weeks_04"]
    assert loaded.as_json() == {"items": 6,
                                "taken": {"knowledge-update": 2, "temporal-reasoning": 2},
                                "skipped": {"abstention": 1, "single-session-user": 1}}
    assert loaded.line() == ("longmemeval: 6 items, 4 taken (2 knowledge-update, "
                             "2 temporal-reasoning); skipped: 1 abstention, "
                             "1 single-session-user")


def test_a_knowledge_update_must_hold_its_final_value_once_when_the_question_is_asked() -> None:
    city = convert(_items(), limit=None, others=1).scenarios[0]
    gold = city.expect.active
    assert len(gold) == 1 and gold[0].words == ("Lisbon",) and gold[0].once
    assert city.ends_at == datetime(2023, 7, 1, 10, 0, tzinfo=UTC)  # the question's date
    assert city.assertions == 1 and not city.expect.absent
    temporal = convert(_items(), limit=None, others=1).scenarios[2]
    assert temporal.expect.active[0].words == ("Learning", "Portuguese")
    assert not temporal.expect.active[0].once


@pytest.mark.parametrize(("others", "kept"), [
    (0, ["answer_city_1", "answer_city_2"]),
    (1, ["chat_a", "answer_city_1", "answer_city_2"]),
    (2, ["chat_a", "answer_city_1", "chat_b", "answer_city_2"]),
    (9, ["chat_a", "answer_city_1", "chat_b", "chat_c", "answer_city_2", "chat_d"]),
])
def test_the_haystack_is_the_answer_sessions_and_up_to_k_others(
        others: int, kept: list[str]) -> None:
    city = convert(_items(), limit=None, others=others).scenarios[0]
    assert [s.id for s in city.sessions] == kept
    assert city.sessions[1 if others else 0].at == datetime(2023, 3, 2, 18, 30, tzinfo=UTC)
    # A commit after each session: the runner's steps.
    assert len(plan_steps(city)) == len(kept)


def test_the_limit_counts_items_taken() -> None:
    loaded = convert(_items(), limit=3, others=0)
    assert len(loaded.scenarios) == 3
    assert loaded.skipped["over --longmemeval-limit"] == 1


def test_sessions_are_put_in_time_order_and_empty_turns_dropped() -> None:
    items = _items()
    item = items[1]
    item["haystack_dates"][0], item["haystack_dates"][2] = (item["haystack_dates"][2],
                                                            item["haystack_dates"][0])
    item["haystack_sessions"][2].append({"role": "user", "content": "  "})
    editor = convert([item], limit=None, others=0).scenarios[0]
    assert [s.id for s in editor.sessions] == ["answer_editor_2", "answer_editor_1"]
    assert len(editor.sessions[0].turns) == 2


def test_an_item_whose_answer_has_no_distinctive_word_is_skipped_and_counted() -> None:
    item = _items()[0]
    item["answer"] = "to be"
    loaded = convert([item], limit=None, others=0)
    assert loaded.scenarios == [] and loaded.skipped == {"no answer words or user turn": 1}


def _broken(change: Any) -> list[Any]:
    items = copy.deepcopy(_items())
    change(items)
    return items


@pytest.mark.parametrize(("raw", "says"), [
    ({"question_id": "x"}, "not a JSON list of LongMemEval items"),
    (_broken(lambda i: i[2].pop("answer")), "item 2: no field 'answer'"),
    (_broken(lambda i: i.__setitem__(1, "text")), "item 1: not an object"),
    (_broken(lambda i: i[0].__setitem__("haystack_sessions", "x")),
     "item 0: field 'haystack_sessions' is not a list"),
    (_broken(lambda i: i[3]["haystack_dates"].pop()),
     "item 3: field 'haystack_sessions': haystack_session_ids, haystack_dates and "
     "haystack_sessions differ in length"),
    (_broken(lambda i: i[1]["haystack_dates"].__setitem__(0, "yesterday")),
     "item 1: field 'haystack_dates': not a date"),
    (_broken(lambda i: i[1].__setitem__("question_date", "soon")),
     "item 1: field 'question_date': not a date"),
    (_broken(lambda i: i[0]["haystack_sessions"][1].__setitem__(0, {"content": "hi"})),
     "item 0: field 'haystack_sessions': session 1 has a turn without a role"),
])
def test_a_malformed_file_names_the_item_and_the_field(raw: Any, says: str) -> None:
    with pytest.raises(MemfleetError) as raised:
        convert(raw, limit=None, others=9)
    assert str(raised.value).startswith(says)


def test_a_file_that_is_not_json_says_so(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(MemfleetError, match=r"^--longmemeval .*lme.json: not JSON: "):
        load_longmemeval(path, limit=None, others=0)
    assert len(load_longmemeval(FIXTURE, limit=None, others=0).scenarios) == 4
