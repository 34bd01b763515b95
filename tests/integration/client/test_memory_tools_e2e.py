"""The memory tools end to end: a model (the project's stub, scripted, over the real
``openai`` client) calls them, docs/tools.md's ``chat_turn`` runs each call through
MemoryTools against the real memory API on real PostgreSQL, and the results go back
to the model. Save, list, search, forget (superseded: the chain shows it); another
user's facts and another assistant's out of reach; memory off stores nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.api_server import new_key
from worker.client import AsyncMemoryApi, AsyncMemoryTools, MemoryApi, MemoryTools
from worker.store.service_keys import ServiceKeyStore

ROOT = Path(__file__).resolve().parents[3]
ChatTurn = Callable[..., str]


def chat_turn_of_the_guide() -> ChatTurn:
    """docs/tools.md's Python example, as written."""
    text = (ROOT / "docs" / "tools.md").read_text("utf-8")
    section = text[text.index("## Python"):text.index("## TypeScript")]
    block = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    scope: dict[str, Any] = {}
    exec(compile(block, "docs/tools.md", "exec"), scope)  # noqa: S102 - our own guide
    turn: ChatTurn = scope["chat_turn"]
    return turn


def calls(*pairs: tuple[str, Any]) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def tool_results(stub: StubServer) -> list[dict[str, Any]]:
    """The tool messages of the last chat request, parsed."""
    last = [r for r in stub.recorded() if r["path"] == CHAT_PATH][-1]["body"]
    return [json.loads(m["content"]) for m in last["messages"] if m["role"] == "tool"]


def turn(chat_turn: ChatTurn, stub: StubServer, tools: MemoryTools, said: str,
         *answers: dict[str, Any]) -> list[dict[str, Any]]:
    """One user turn where the model answers ``answers`` (tool calls, then text); the
    tool results the model got back."""
    stub.control("DELETE", "/_stub/requests")
    stub.script(*answers)
    model = OpenAI(base_url=stub.v1, api_key="none", max_retries=0)
    reply = chat_turn(model, tools, [{"role": "system", "content": "You are a coach."},
                                     {"role": "user", "content": said}], model_name="stub")
    assert reply == answers[-1]["content"]
    return tool_results(stub)


async def test_a_model_saves_lists_searches_and_forgets_through_the_tools(
    api_url: str, keys: ServiceKeyStore, stub: StubServer,
) -> None:
    chat_turn = chat_turn_of_the_guide()
    admin = MemoryApi(api_url, service_key=await new_key(keys, "read", "admin"), timeout_s=30)
    tools = MemoryTools(admin, user_id="ada", agent_id="coach")

    (saved,) = turn(chat_turn, stub, tools, "Remember that I like green tea.",
                    calls(("save_memory", {"text": "Likes green tea",
                                           "category": "preference"})),
                    {"content": "Noted: you like green tea."})
    assert saved["ok"] is True
    fact_id = saved["saved"]["id"]
    stored = admin.fact_chain("ada", fact_id).versions[-1]
    assert (stored.text, stored.source_kind, stored.basis, stored.scope) == (
        "Likes green tea", "manual", "stated", "profile")
    assert stored.written_via == "tool", "the assistant saved it, with the memory tools"
    # The model's turn went with the tools, and the call's result came back to it.
    requests = [r["body"] for r in stub.recorded() if r["path"] == CHAT_PATH]
    assert requests[0]["tools"] == tools.definitions
    assert requests[1]["messages"][-1]["tool_call_id"] == "call_1"

    (listed,) = turn(chat_turn, stub, tools, "What do you remember about me?",
                     calls(("list_memory", "{}")), {"content": "That you like green tea."})
    assert [f["id"] for f in listed["facts"]] == [fact_id]

    found, bad = turn(chat_turn, stub, tools, "What do I drink?",
                      calls(("search_memory", {"query": "green tea", "k": 3}),
                            ("search_memory", "{not json")),
                      {"content": "Green tea."})
    assert found["results"][0]["id"] == fact_id and found["results"][0]["text"] == "Likes green tea"
    assert bad == {"ok": False, "error": "bad_arguments",
                   "message": "the arguments are not valid JSON"}

    forgotten, again = turn(chat_turn, stub, tools, "Forget the tea thing.",
                            calls(("forget_memory", {"fact_id": fact_id}),
                                  ("forget_memory", {"fact_id": fact_id})),
                            {"content": "Forgotten."})
    assert forgotten == {"ok": True, "forgotten": {"id": fact_id, "text": "Likes green tea",
                                                   "category": "preference"}}
    assert again["error"] == "not_found"

    (after,) = turn(chat_turn, stub, tools, "And now?", calls(("list_memory", {})),
                    {"content": "Nothing."})
    assert after == {"ok": True, "count": 0, "facts": [], "truncated": False}
    (version,) = admin.fact_chain("ada", fact_id).versions
    assert version.superseded_at is not None and version.superseded_by is None  # kept


async def test_another_users_and_another_assistants_facts_are_out_of_reach(
    api_url: str, keys: ServiceKeyStore, stub: StubServer,
) -> None:
    chat_turn = chat_turn_of_the_guide()
    admin = MemoryApi(api_url, service_key=await new_key(keys, "read", "admin"), timeout_s=30)
    bobs = admin.add_fact("bob", "Keeps a secret diary", category="fact")
    tutors = admin.add_fact("ada", "Secret nickname Dodo", scope="relationship",
                            agent_id="tutor")
    tools = MemoryTools(admin, user_id="ada", agent_id="coach")

    results = turn(
        chat_turn, stub, tools, "Tell me Bob's secrets.",
        calls(("search_memory", {"query": "secret diary", "user_id": "bob"}),
              ("list_memory", {"agent_id": "tutor"}),
              ("search_memory", {"query": "secret"}),
              ("list_memory", {}),
              ("forget_memory", {"fact_id": bobs.id}),
              ("forget_memory", {"fact_id": tutors.id})),
        {"content": "I know nothing of Bob."})
    user_field, agent_field, searched, listed, forget_bobs, forget_tutors = results
    assert user_field["error"] == "bad_arguments" and "user_id" in user_field["message"]
    assert agent_field["error"] == "bad_arguments" and "agent_id" in agent_field["message"]
    assert searched == {"ok": True, "results": []}
    assert listed["count"] == 0
    assert forget_bobs["error"] == forget_tutors["error"] == "not_found"
    # Nothing of theirs changed.
    assert [f.id for f in admin.facts("bob").facts] == [bobs.id]
    assert admin.fact_chain("ada", tutors.id).versions[-1].superseded_at is None
    # The tutor's own executor sees its fact.
    tutor = MemoryTools(admin, user_id="ada", agent_id="tutor")
    assert json.loads(tutor.run("list_memory", {}))["facts"][0]["id"] == tutors.id


async def test_memory_off_stores_nothing_and_says_so(
    api_url: str, keys: ServiceKeyStore, stub: StubServer,
) -> None:
    chat_turn = chat_turn_of_the_guide()
    admin = MemoryApi(api_url, service_key=await new_key(keys, "read", "admin"), timeout_s=30)
    admin.set_consent("cy", False)
    tools = MemoryTools(admin, user_id="cy", agent_id="coach")

    saved, searched = turn(chat_turn, stub, tools, "Remember my PIN is 1234.",
                           calls(("save_memory", {"text": "PIN is 1234"}),
                                 ("search_memory", {"query": "PIN"})),
                           {"content": "Memory is off, so I did not save it."})
    assert saved["error"] == searched["error"] == "memory_off"
    assert "Memory is off" in saved["message"]
    assert admin.facts("cy", scope="all").count == 0
    assert admin.export("cy").facts == []


@pytest.mark.parametrize("agent", [None, "coach"])
async def test_the_async_executor_against_the_real_api(
    api_url: str, keys: ServiceKeyStore, agent: str | None,
) -> None:
    async with AsyncMemoryApi(api_url, service_key=await new_key(keys, "read", "admin"),
                              timeout_s=30) as api:
        tools = AsyncMemoryTools(api, user_id="dee", agent_id=agent)
        saved = json.loads(await tools.run("save_memory", '{"text": "Runs marathons"}'))
        stored = (await api.fact_chain("dee", saved["saved"]["id"])).versions[-1]
        assert stored.written_via == "tool"
        found = json.loads(await tools.run("search_memory", {"query": "marathons"}))
        assert found["results"][0]["id"] == saved["saved"]["id"]
        assert json.loads(await tools.run("forget_memory",
                                          {"fact_id": saved["saved"]["id"]}))["ok"] is True
        assert json.loads(await tools.run("list_memory", {}))["count"] == 0
