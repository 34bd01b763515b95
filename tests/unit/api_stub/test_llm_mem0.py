"""The LLM stub's mem0 answer mode, on prompts mem0 itself built.

tests/fixtures/mem0/ holds chat requests made with mem0's own prompt functions
(mem0ai 1.0.9: get_fact_retrieval_messages (user and agent) + ensure_json_instruction, and
get_update_memory_messages; mem0ai 2.2.1: ADDITIVE_EXTRACTION_PROMPT and
generate_additive_extraction_prompt), captured in those versions' virtualenvs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from api_stub.llm_mem0 import mem0_answer
from api_stub.llm_stub import CHAT_PATH, create_app

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mem0"


def _prompts(version: str) -> dict[str, dict[str, Any]]:
    loaded: dict[str, dict[str, Any]] = json.loads(
        (FIXTURES / f"mem0_{version}_prompts.json").read_text())
    return loaded


def test_mem0_1_fact_extraction_answers_facts_from_the_user_lines_only() -> None:
    answer = mem0_answer(_prompts("1.0.9")["extraction"])
    # The rules extractor's texts, the assistant's lines ignored: mem0's {"facts": [str]}.
    assert answer == {"facts": ["Lives in Porto", "Works at Kalo Labs", "No longer uses Venmo",
                                "Is learning Rust"]}


def test_mem0_1_agent_extraction_answers_facts_from_the_assistant_lines_only() -> None:
    # mem0 1.x asks for the assistant's facts when an add names an agent: "call me Jo",
    # the user's line, is not among them.
    answer = mem0_answer(_prompts("1.0.9")["agent_extraction"])
    assert answer is not None
    texts = " ".join(answer["facts"]).lower()
    assert "astronomy" in texts and "jo" not in texts.split()


def test_mem0_1_memory_update_answers_events_on_mem0s_ids() -> None:
    answer = mem0_answer(_prompts("1.0.9")["update"])
    assert answer == {"memory": [
        {"id": "0", "text": "Lives in Porto", "event": "UPDATE", "old_memory": "Lives in Lisbon"},
        {"id": "1", "text": "Works at Kalo Labs", "event": "UPDATE",
         "old_memory": "Works at Zanpel Labs"},
        # mem0 skips an entry without text: a DELETE carries the old memory's.
        {"id": "2", "text": "Uses Venmo", "event": "DELETE"},
        {"id": "3", "text": "Likes sushi", "event": "NONE"},
        {"id": "4", "text": "Is learning Rust", "event": "ADD"},
    ]}


def test_mem0_1_memory_update_with_an_empty_memory_adds_the_facts() -> None:
    body = _prompts("1.0.9")["update"]
    prompt = body["messages"][0]["content"]
    start = prompt.index("    Below is the current content of my memory")
    end = prompt.index("    The new retrieved facts are mentioned")
    empty = prompt[:start] + "\n    Current memory is empty.\n\n    " + prompt[end:]
    answer = mem0_answer({**body, "messages": [{"role": "user", "content": empty}]})
    assert answer is not None
    # "No longer uses Venmo" has nothing to retract: no event, as the rules decide.
    assert answer == {"memory": [{"id": "0", "text": "Lives in Porto", "event": "ADD"},
                                 {"id": "1", "text": "Works at Kalo Labs", "event": "ADD"},
                                 {"id": "2", "text": "Is learning Rust", "event": "ADD"}]}


def test_mem0_2_additive_extraction_adds_only_what_is_not_already_remembered() -> None:
    answer = mem0_answer(_prompts("2.2.1")["additive"])
    # "Is learning Rust" is among the Existing Memories; the old city is not superseded.
    assert answer == {"memory": [{"id": "0", "text": "Lives in Porto"},
                                 {"id": "1", "text": "Works at Kalo Labs"},
                                 {"id": "2", "text": "No longer uses Venmo"}]}


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user", "content": json.dumps({"task": "fact_extraction"})}]},
    {"messages": [{"role": "system", "content": "You are helpful."},
                  {"role": "user", "content": "Input:\nuser: I moved to Porto."}]},
    {"messages": [{"role": "user", "content": "smart memory manager, no backticks"}]},
    {"messages": []},
])
def test_requests_that_are_not_mem0s_get_no_mem0_answer(body: dict[str, Any]) -> None:
    assert mem0_answer(body) is None


def test_the_stub_answers_mem0s_prompts_as_chat_completions() -> None:
    with TestClient(create_app()) as client:
        for version, name in (("1.0.9", "extraction"), ("1.0.9", "update"),
                              ("2.2.1", "additive")):
            body = _prompts(version)[name]
            response = client.post(CHAT_PATH, json=body)
            assert response.status_code == 200, response.text
            content = response.json()["choices"][0]["message"]["content"]
            assert json.loads(content) == mem0_answer(body)
        # Still a 400 for a prompt that is neither memfleet's wire format nor mem0's.
        other = client.post(CHAT_PATH, json={"messages": [{"role": "user", "content": "hi"}]})
        assert other.status_code == 400
