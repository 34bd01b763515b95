"""search_memory's notes (docs/tools.md, docs/notes.md): the notes a search found shown
after the facts, in a section marked as no settled facts and without ids, at most k;
with none (notes off, an API without them) the answer is byte for byte the facts'
alone. The API is httpx's MockTransport answering tests/fixtures/tools/search.json's
bodies: what is tested is the executor's formatting of them."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.unit.client.tool_fixtures import (
    RENOVATION,
    SEARCH_CASES,
    SEARCH_FIXTURE,
    TEA,
    note_hit,
    render_search,
    search_answer,
)
from worker.client import AsyncMemoryApi, AsyncMemoryTools
from worker.client.memory_tools import NOTES_ABOUT

KEY = "mfk_0123456789ab_" + "cd" * 32
# search_memory's answer before notes were shown (docs/tools.md's example): kept as is.
FACTS_ONLY = ('{"ok": true, "results": [{"id": 1, "text": "Likes tea", "category": '
              '"preference", "score": 0.032787}]}')


def test_the_typescript_fixture_is_what_the_python_executor_answers() -> None:
    assert SEARCH_FIXTURE.read_text("utf-8") == render_search(), (
        "tests/fixtures/tools/search.json is stale: run"
        " `python -m tests.unit.client.tool_fixtures` and rebuild clients/typescript/")


@pytest.mark.parametrize("body", [{"results": [TEA]}, {"results": [TEA], "notes": []}],
                         ids=["an API without notes", "notes on, none found"])
def test_without_notes_the_answer_is_the_facts_alone_byte_for_byte(body: dict[str, Any]) -> None:
    assert search_answer({"query": "tea"}, body) == FACTS_ONLY


def test_the_notes_come_after_the_facts_marked_as_no_facts_and_without_ids() -> None:
    text = search_answer({"query": "kitchen"}, {"results": [TEA], "notes": [RENOVATION]})
    answer = json.loads(text)
    assert list(answer) == ["ok", "results", "notes"]
    assert answer["results"] == json.loads(FACTS_ONLY)["results"]
    assert answer["notes"] == {"about": NOTES_ABOUT, "items": [
        {"text": "The user is considering a kitchen renovation, budget about $40k.",
         "said_on": "2026-11-22"}]}
    assert list(answer["notes"]) == ["about", "items"]  # what they are, before them
    assert "Not confirmed facts" in NOTES_ABOUT and "forget_memory" in NOTES_ABOUT
    assert '"id": 7' not in text and "score" not in json.dumps(answer["notes"])


def test_a_notes_text_is_data_as_written_never_markup() -> None:
    raw = "Thinks about <b>*tiles*</b>,\nor\t\u00e9maux \U0001f3e0 [x](http://e.test)"
    answer = json.loads(search_answer({"query": "tiles"},
                                      {"results": [], "notes": [note_hit(3, raw)]}))
    assert answer["notes"]["items"] == [{"text": raw, "said_on": "2026-11-22"}]


@pytest.mark.parametrize(("k", "shown"), [(1, 1), (2, 2), (5, 3)])
def test_at_most_k_notes_whatever_the_api_sends(k: int, shown: int) -> None:
    notes = [note_hit(i, f"Considering plan {i}.") for i in (1, 2, 3)]
    answer = json.loads(search_answer({"query": "plan", "k": k},
                                      {"results": [TEA], "notes": notes}))
    assert [n["text"] for n in answer["notes"]["items"]] == [
        f"Considering plan {i}." for i in (1, 2, 3)][:shown]


async def test_the_async_executor_answers_each_case_as_the_blocking_one() -> None:
    for _, arguments, body in SEARCH_CASES:
        def api(request: httpx.Request, body: dict[str, Any] = body) -> httpx.Response:
            if request.url.path.endswith("/consent"):
                return httpx.Response(200, json={"enabled": True, "chosen": True})
            return httpx.Response(200, json=body)

        async with AsyncMemoryApi("http://memory.test", service_key=KEY,
                                  transport=httpx.MockTransport(api)) as client:
            answer = await AsyncMemoryTools(client, user_id="ada").run("search_memory",
                                                                       arguments)
        assert answer == search_answer(arguments, body)
