"""The stub's scripted answers (POST /_stub/script): a test's model turn, its text or
its tool calls, read back by the real ``openai`` client as a model's would be."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageFunctionToolCall
from starlette.testclient import TestClient

from api_stub.llm_stub import StubServer, StubState, create_app, scripted_message


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(dim=8) as server:
        yield server


def test_tool_calls_reach_the_openai_client_then_the_script_runs_out(stub: StubServer) -> None:
    stub.reset()
    assert stub.script(
        {"content": None, "tool_calls": [
            {"name": "search_memory", "arguments": {"query": "tea"}},
            {"name": "list_memory", "arguments": "{}", "id": "mine"}]},
        {"content": "You like tea."},
    ) == 2
    model = OpenAI(base_url=stub.v1, api_key="none", max_retries=0)
    tools = [{"type": "function", "function": {"name": "search_memory",
                                              "parameters": {"type": "object"}}}]
    asked = [{"role": "user", "content": "What do I drink?"}]

    first = model.chat.completions.create(model="m", messages=asked, tools=tools)  # type: ignore[arg-type]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = [c for c in choice.message.tool_calls or []
             if isinstance(c, ChatCompletionMessageFunctionToolCall)]
    assert [(c.id, c.function.name) for c in calls] == [("call_1", "search_memory"),
                                                        ("mine", "list_memory")]
    assert json.loads(calls[0].function.arguments) == {"query": "tea"}
    assert calls[1].function.arguments == "{}"  # a string goes as it is

    second = model.chat.completions.create(model="m", messages=asked)  # type: ignore[arg-type]
    assert second.choices[0].message.content == "You like tea."
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].finish_reason == "stop"
    # Spent: the next request is the stub's own again (not a wire request: refused).
    assert stub.control("GET", "/_stub/script") == {"queued": 0}
    # Both were recorded, with the tools the client sent.
    bodies = [r["body"] for r in stub.recorded()]
    assert bodies[0]["tools"] == tools


def test_reset_and_delete_drop_what_is_queued() -> None:
    state = StubState()
    client = TestClient(create_app(state))
    assert client.post("/_stub/script", json=[{"content": "a"}, {"content": "b"}]).json() == {
        "queued": 2}
    assert client.delete("/_stub/script").json() == {"queued": 0}
    state.script([{"content": "c"}])
    state.reset()
    assert client.get("/_stub/script").json() == {"queued": 0}


@pytest.mark.parametrize("answer", [
    {}, {"content": None}, {"content": 3}, {"text": "hi"},
    {"tool_calls": [{"arguments": {}}]}, {"tool_calls": "search"}, "hello",
])
def test_a_malformed_script_is_refused_and_queues_nothing(answer: object) -> None:
    state = StubState()
    client = TestClient(create_app(state))
    answered = client.post("/_stub/script", json=[{"content": "fine"}, answer])
    assert answered.status_code == 400
    assert client.get("/_stub/script").json() == {"queued": 0}
    with pytest.raises(ValueError):
        scripted_message(answer)
