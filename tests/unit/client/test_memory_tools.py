"""The memory tools (worker.client.memory_tools) against httpx's MockTransport: the
definitions (one JSON file, no user or agent field, the API's limits), the validation
of a model's arguments (an error result the model can read, no request sent), the
consent rule (memory off: nothing stored, nothing read), the scoping to one user and
one assistant, and what raises (the chat server's mistakes)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from worker.api.memory_models import MAX_FACT_CHARS, MAX_QUERY_CHARS
from worker.client import AccessDenied, AsyncMemoryApi, AsyncMemoryTools, MemoryApi, MemoryTools
from worker.client.memory_tools import memory_tool_definitions, validate_arguments
from worker.memory_rules import CATEGORIES

URL = "http://memory.test:8088"
NOW = "2026-11-22T10:00:00+00:00"


def fact(fact_id: int, text: str, *, scope: str = "profile", agent: str | None = None,
         superseded: bool = False, category: str = "general") -> dict[str, Any]:
    return {"id": fact_id, "user_id": "ada", "text": text, "category": category,
            "importance": 5, "observed_at": NOW, "source_kind": "manual",
            "source_session_id": None, "superseded_at": NOW if superseded else None,
            "superseded_by": None, "created_at": NOW, "scope": scope, "agent_id": agent,
            "valid_from": NOW, "valid_to": None, "expires_at": None, "pinned": False,
            "basis": "stated", "confidence": 1.0, "superseded_reason": None,
            "embedding_model": "m", "embedding_dim": 8}


class FakeApi:
    """Just enough of the memory API for the tools, recording what was sent."""

    def __init__(self, *, enabled: bool = True, status: int | None = None) -> None:
        self.enabled, self.status = enabled, status
        self.sent: list[httpx.Request] = []
        self.facts = {1: fact(1, "Likes tea", category="preference"),
                      2: fact(2, "Calls the coach Sam", scope="relationship", agent="coach"),
                      3: fact(3, "Lived in Paris", superseded=True)}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if self.status is not None:
            return httpx.Response(self.status, json={"detail": "no"})
        path, method = request.url.path, request.method
        if path.endswith("/consent"):
            return httpx.Response(200, json={"enabled": self.enabled, "chosen": True})
        if path.endswith("/chain"):
            fact_id = int(path.split("/")[-2])
            if fact_id not in self.facts:
                return httpx.Response(404, json={"detail": "no such fact"})
            return httpx.Response(200, json={"fact_id": fact_id,
                                             "versions": [self.facts[fact_id]]})
        if method == "DELETE":
            return httpx.Response(200, json=self.facts[int(path.split("/")[-1])])
        if method == "POST":
            body = json.loads(request.content)
            return httpx.Response(201, json=fact(9, body["text"],
                                                 category=body.get("category", "general")))
        if path.endswith("/search"):
            return httpx.Response(200, json={"results": [
                {"fact": self.facts[1], "score": 0.5, "semantic_rank": 1, "lexical_rank": 1}]})
        listed = [f for f in self.facts.values() if f["superseded_at"] is None]
        return httpx.Response(200, json={"user_id": "ada", "count": len(listed), "groups": [
            {"category": c, "facts": [f for f in listed if f["category"] == c]}
            for c in CATEGORIES if any(f["category"] == c for f in listed)]})

    def writes(self) -> list[str]:
        return [r.method for r in self.sent if r.method in ("POST", "DELETE", "PATCH", "PUT")]


def tools_over(api: FakeApi, agent: str | None = "coach") -> MemoryTools:
    client = MemoryApi(URL, service_key="mfk_0123456789ab_" + "cd" * 32,
                       transport=httpx.MockTransport(api))
    return MemoryTools(client, user_id="ada", agent_id=agent)


def result(text: str) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(text)
    return answer


# The definitions --------------------------------------------------------------------

def test_the_definitions_are_the_openai_tools_format_with_no_user_or_agent_field() -> None:
    definitions = memory_tool_definitions()
    assert [d["function"]["name"] for d in definitions] == [
        "search_memory", "save_memory", "forget_memory", "list_memory"]
    for d in definitions:
        assert d["type"] == "function"
        assert set(d["function"]) == {"name", "description", "parameters"}
        params = d["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        assert not {"user", "user_id", "agent", "agent_id"} & set(params["properties"])
        assert len(d["function"]["description"]) < 500


def test_the_definitions_hold_the_api_limits_and_categories() -> None:
    by_name = {d["function"]["name"]: d["function"]["parameters"]["properties"]
               for d in memory_tool_definitions()}
    assert by_name["save_memory"]["text"]["maxLength"] == MAX_FACT_CHARS
    assert by_name["search_memory"]["query"]["maxLength"] == MAX_QUERY_CHARS
    assert by_name["save_memory"]["category"]["enum"] == list(CATEGORIES)
    assert by_name["list_memory"]["category"]["enum"] == list(CATEGORIES)


def test_each_executor_hands_out_its_own_copy() -> None:
    tools = tools_over(FakeApi())
    tools.definitions.clear()
    assert len(tools_over(FakeApi()).definitions) == 4


# Validation ------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "arguments", "code", "says"), [
    ("delete_everything", "{}", "unknown_tool", "search_memory"),
    (None, "{}", "unknown_tool", "no such tool"),
    ("search_memory", "{query: tea", "bad_arguments", "not valid JSON"),
    ("search_memory", "[1]", "bad_arguments", "JSON object"),
    ("search_memory", "{}", "bad_arguments", "missing argument(s): query"),
    ("search_memory", {"query": "tea", "user_id": "bob"}, "bad_arguments",
     "unknown argument(s): user_id"),
    ("list_memory", {"agent_id": "other"}, "bad_arguments", "unknown argument(s): agent_id"),
    ("search_memory", {"query": 3}, "bad_arguments", "query must be a JSON string"),
    ("search_memory", {"query": "tea", "k": True}, "bad_arguments", "k must be a JSON integer"),
    ("search_memory", {"query": "tea", "k": 2.5}, "bad_arguments", "k must be a JSON integer"),
    ("search_memory", {"query": "tea", "k": 0}, "bad_arguments", "k must be at least 1"),
    ("search_memory", {"query": "tea", "k": 21}, "bad_arguments", "k must be at most 20"),
    ("search_memory", {"query": "x" * (MAX_QUERY_CHARS + 1)}, "bad_arguments",
     f"longer than {MAX_QUERY_CHARS}"),
    ("save_memory", {"text": "x" * (MAX_FACT_CHARS + 1)}, "bad_arguments",
     f"longer than {MAX_FACT_CHARS}"),
    ("save_memory", {"text": "   "}, "bad_arguments", "text is blank"),
    ("save_memory", {"text": "a\x00b"}, "bad_arguments", "text contains"),
    ("save_memory", {"text": "tea", "category": "secret"}, "bad_arguments", "one of"),
    ("forget_memory", {"fact_id": "1"}, "bad_arguments", "fact_id must be a JSON integer"),
    ("forget_memory", {"fact_id": 0}, "bad_arguments", "at least 1"),
    ("list_memory", {"limit": 101}, "bad_arguments", "at most 100"),
    ("list_memory", "x" * 20_000, "bad_arguments", "too long"),
])
def test_a_bad_call_is_an_error_result_and_sends_nothing(
    name: Any, arguments: Any, code: str, says: str,
) -> None:
    api = FakeApi()
    answer = result(tools_over(api).run(name, arguments))
    assert answer["ok"] is False and answer["error"] == code
    assert says in answer["message"]
    assert api.sent == []


def test_the_refusal_never_quotes_the_text() -> None:
    answer = tools_over(FakeApi()).run("save_memory", {"text": "secret\x01" * 10})
    assert "secret" not in answer


@pytest.mark.parametrize("arguments", ["", None, "  ", {}])
def test_no_arguments_are_an_empty_object(arguments: Any) -> None:
    assert validate_arguments("list_memory", arguments) == {}


# Consent and scope ---------------------------------------------------------------

@pytest.mark.parametrize(("name", "arguments"), [
    ("save_memory", {"text": "Likes green tea"}),
    ("search_memory", {"query": "tea"}),
    ("list_memory", {}),
])
def test_memory_off_stores_and_reads_nothing_and_says_so(name: str, arguments: Any) -> None:
    api = FakeApi(enabled=False)
    answer = result(tools_over(api).run(name, arguments))
    assert answer == {"ok": False, "error": "memory_off", "message": answer["message"]}
    assert "Memory is off" in answer["message"]
    assert [r.url.path for r in api.sent] == ["/users/ada/consent"]


def test_save_is_a_profile_fact_of_the_user_written_via_the_tool() -> None:
    api = FakeApi()
    answer = result(tools_over(api).run("save_memory", '{"text": "Likes green tea", '
                                                       '"category": "preference"}'))
    assert answer == {"ok": True, "saved": {"id": 9, "text": "Likes green tea",
                                            "category": "preference"}}
    post = api.sent[-1]
    assert post.url.path == "/users/ada/facts"
    assert json.loads(post.content) == {"text": "Likes green tea", "category": "preference",
                                        "scope": "profile", "via": "tool",
                                            "if_memory_on": True}


def test_search_and_list_are_scoped_to_the_assistant() -> None:
    api = FakeApi()
    tools = tools_over(api)
    found = result(tools.run("search_memory", {"query": "tea", "k": 3}))
    assert found == {"ok": True, "results": [
        {"id": 1, "text": "Likes tea", "category": "preference", "score": 0.5}]}
    query = parse_qs(api.sent[-1].url.query.decode())
    assert query == {"q": ["tea"], "k": ["3"], "scope": ["both"], "agent_id": ["coach"]}

    listed = result(tools.run("list_memory", {"category": "preference", "limit": 1}))
    assert listed == {"ok": True, "count": 1, "truncated": False, "facts": [
        {"id": 1, "text": "Likes tea", "category": "preference"}]}
    assert parse_qs(api.sent[-1].url.query.decode()) == {"scope": ["both"],
                                                          "agent_id": ["coach"]}
    # Without an assistant: the profile only, never every agent's relationship facts.
    bare = FakeApi()
    tools_over(bare, agent=None).run("list_memory", {})
    assert parse_qs(bare.sent[-1].url.query.decode()) == {"scope": ["profile"]}


def test_forget_supersedes_a_fact_the_assistant_sees() -> None:
    api = FakeApi()
    answer = result(tools_over(api).run("forget_memory", {"fact_id": 2}))
    assert answer == {"ok": True, "forgotten": {"id": 2, "text": "Calls the coach Sam",
                                                "category": "general"}}
    assert (api.sent[-1].method, api.sent[-1].url.path) == ("DELETE", "/users/ada/facts/2")


@pytest.mark.parametrize(("fact_id", "agent"), [
    (2, "tutor"),   # another assistant's relationship fact
    (2, None),
    (3, "coach"),   # already superseded
    (99, "coach"),  # none (or another user's: the same 404)
])
def test_forget_what_the_assistant_cannot_see_is_not_found(fact_id: int,
                                                          agent: str | None) -> None:
    api = FakeApi()
    answer = result(tools_over(api, agent=agent).run("forget_memory", {"fact_id": fact_id}))
    assert answer["error"] == "not_found"
    assert api.writes() == []


@pytest.mark.parametrize(("status", "code"), [(429, "rate_limited"), (503, "unavailable"),
                                              (422, "bad_arguments"), (409, "not_found")])
def test_the_api_refusals_are_results(status: int, code: str) -> None:
    api = FakeApi(status=status)
    tools = tools_over(api)
    tools.api.retries = 0
    assert result(tools.run("list_memory", {}))["error"] == code


def test_the_chat_servers_mistakes_raise() -> None:
    with pytest.raises(AccessDenied):
        tools_over(FakeApi(status=403)).run("list_memory", {})
    with pytest.raises(TypeError, match="needs a MemoryApi"):
        MemoryTools(object(), user_id="ada")  # type: ignore[arg-type]
    sync = MemoryApi(URL, service_key="mfk_0123456789ab_" + "cd" * 32)
    with pytest.raises(TypeError, match="needs a AsyncMemoryApi"):
        AsyncMemoryTools(sync, user_id="ada")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="user_id"):
        MemoryTools(sync, user_id=" ")
    with pytest.raises(ValueError, match="agent_id"):
        MemoryTools(sync, user_id="ada", agent_id="")


async def test_the_async_executor_runs_the_same_calls() -> None:
    api = FakeApi()
    client = AsyncMemoryApi(URL, service_key="mfk_0123456789ab_" + "cd" * 32,
                            transport=httpx.MockTransport(api))
    tools = AsyncMemoryTools(client, user_id="ada", agent_id="coach")
    assert result(await tools.run("save_memory", {"text": "Likes tea"}))["saved"]["id"] == 9
    assert result(await tools.run("search_memory", {"query": "tea"}))["results"][0]["id"] == 1
    assert result(await tools.run("list_memory", {}))["count"] == 2
    assert result(await tools.run("forget_memory", {"fact_id": 2}))["ok"] is True
    assert result(await tools.run("forget_memory", {"fact_id": 3}))["error"] == "not_found"
    assert result(await tools.run("nope", {}))["error"] == "unknown_tool"
    off = FakeApi(enabled=False)
    offline = AsyncMemoryTools(AsyncMemoryApi(URL, service_key="mfk_0123456789ab_" + "cd" * 32,
                                              transport=httpx.MockTransport(off)),
                               user_id="ada")
    assert result(await offline.run("save_memory", {"text": "x"}))["error"] == "memory_off"
    assert off.writes() == []
    await client.aclose()



def test_the_typescript_fixture_is_what_the_python_executor_answers() -> None:
    from tests.unit.client.tool_fixtures import FIXTURE, render

    assert FIXTURE.read_text("utf-8") == render(), (
        "tests/fixtures/tools/validation.json is stale: run"
        " `python -m tests.unit.client.tool_fixtures` and rebuild clients/typescript/")


def test_a_save_the_api_finds_memory_off_for_is_memory_off_not_a_missing_fact() -> None:
    """Memory turned off between the tool's consent read and its write: the API's 409
    MemoryOff (the write's own check) reads as memory_off, a plain 409 as not_found."""
    api = FakeApi()

    def off_at_write(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            api.sent.append(request)
            return httpx.Response(409, json={"detail": "the user's memory is off: nothing "
                                                       "was stored", "error": "MemoryOff"})
        return FakeApi.__call__(api, request)

    tools = MemoryTools(MemoryApi(URL, service_key="mfk_0123456789ab_" + "cd" * 32,
                                  transport=httpx.MockTransport(off_at_write)),
                        user_id="ada")
    answer = result(tools.run("save_memory", {"text": "Likes green tea"}))
    assert answer["error"] == "memory_off"
