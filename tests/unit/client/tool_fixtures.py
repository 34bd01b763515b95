"""The memory tools' cases, with the Python executor's answers, for the TypeScript
executor to match (clients/typescript/src/test/unit/tools.test.ts):

    python -m tests.unit.client.tool_fixtures    # rewrite the files

validation.json: each case is a tool name and arguments (a string as the model sends
them, or an object) and the answer: the checked arguments, or the error code and
message. search.json: each case is search_memory's arguments, the memory API's search
answer (with notes, without, from an API that has none) and the executor's answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx

from worker.api.memory_models import MAX_FACT_CHARS, MAX_QUERY_CHARS
from worker.client.memory_api import MemoryApi
from worker.client.memory_tools import MemoryTools, ToolArguments, validate_arguments

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "tools" / "validation.json"
SEARCH_FIXTURE = FIXTURE.with_name("search.json")

CASES: list[tuple[Any, Any]] = [
    ("delete_everything", "{}"),
    (None, "{}"),
    ("search_memory", "{query: tea"),
    ("search_memory", "[1]"),
    ("search_memory", '"tea"'),
    ("search_memory", "{}"),
    ("search_memory", '{"query": "tea", "k": NaN}'),
    ("search_memory", {"query": "tea", "user_id": "bob"}),
    ("search_memory", {"query": "tea", "user_id": "bob", "agent_id": "x"}),
    ("list_memory", {"agent_id": "other"}),
    ("search_memory", {"query": 3}),
    ("search_memory", {"query": None}),
    ("search_memory", {"query": "tea", "k": True}),
    ("search_memory", {"query": "tea", "k": 2.5}),
    ("search_memory", '{"query": "tea", "k": 3.0}'),
    ("search_memory", {"query": "tea", "k": 0}),
    ("search_memory", {"query": "tea", "k": 21}),
    ("search_memory", {"query": "tea", "k": 20}),
    ("search_memory", {"query": "x" * (MAX_QUERY_CHARS + 1)}),
    ("search_memory", {"query": "\U0001f375" * MAX_QUERY_CHARS}),
    ("save_memory", {"text": "x" * (MAX_FACT_CHARS + 1)}),
    ("save_memory", {"text": "x" * MAX_FACT_CHARS}),
    ("save_memory", {"text": "   "}),
    ("save_memory", {"text": "\x1c\u3000"}),
    ("save_memory", {"text": "\u3000\u2028 "}),
    ("save_memory", {"text": "\ufeff"}),
    ("save_memory", {"text": "a\x00b"}),
    ("save_memory", {"text": "two\nlines\tok"}),
    ("save_memory", {"text": "tea", "category": "secret"}),
    ("save_memory", {"text": "Likes tea", "category": "preference"}),
    ("save_memory", {}),
    ("forget_memory", {"fact_id": "1"}),
    ("forget_memory", {"fact_id": 0}),
    ("forget_memory", {"fact_id": -3}),
    ("forget_memory", {"fact_id": 12}),
    ("forget_memory", '{"fact_id": 12, "fact_id": 13}'),
    ("list_memory", {"limit": 101}),
    ("list_memory", {"category": "event", "limit": 1}),
    ("list_memory", ""),
    ("list_memory", None),
    ("list_memory", "x" * 20_000),
]


def answer(name: Any, arguments: Any) -> dict[str, Any]:
    try:
        return {"ok": True, "arguments": validate_arguments(name, arguments)}
    except ToolArguments as refused:
        return {"ok": False, "error": refused.code, "message": refused.message}


def render() -> str:
    cases = [{"name": name, "arguments": arguments, "answer": answer(name, arguments)}
             for name, arguments in CASES]
    return json.dumps(cases, indent=1, ensure_ascii=False) + "\n"


T = "2026-11-22T10:00:00Z"


def api_fact(fact_id: int, text: str, *, pinned: bool = False) -> dict[str, Any]:
    return {"id": fact_id, "user_id": "ada", "text": text, "category": "preference",
            "importance": 5, "observed_at": T, "source_kind": "manual",
            "source_session_id": None, "superseded_at": None, "superseded_by": None,
            "created_at": T, "scope": "profile", "agent_id": None, "valid_from": T,
            "valid_to": None, "expires_at": None, "pinned": pinned, "basis": "stated",
            "confidence": 1.0, "superseded_reason": None, "embedding_model": "m",
            "embedding_dim": 8}


def fact_hit(fact_id: int, text: str, score: float, pinned: bool = False) -> dict[str, Any]:
    return {"fact": api_fact(fact_id, text, pinned=pinned), "score": score,
            "semantic_rank": 1, "lexical_rank": None}


def note_hit(note_id: int, text: str, observed_at: str = T) -> dict[str, Any]:
    return {"kind": "note", "score": 0.0163934426, "semantic_rank": 1, "lexical_rank": 2,
            "note": {"id": note_id, "text": text, "observed_at": observed_at,
                     "source_session_id": "s1", "created_at": observed_at,
                     "superseded_at": None, "superseded_by": None,
                     "superseded_reason": None, "promoted_to": None}}


TEA = fact_hit(1, "Likes tea", 0.0327868852)
RENOVATION = note_hit(7, "The user is considering a kitchen renovation, budget about $40k.")
SEARCH_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("an API without notes: the facts alone", {"query": "tea"}, {"results": [TEA]}),
    ("notes on, none found: the same answer", {"query": "tea"}, {"results": [TEA], "notes": []}),
    ("nothing found", {"query": "tea"}, {"results": [], "notes": []}),
    ("facts, then the notes", {"query": "kitchen", "k": 3}, {
        "results": [TEA, fact_hit(2, "Cooks on Sundays", 0.0161290323, pinned=True)],
        "notes": [RENOVATION, note_hit(
            8, "Thinks about <b>*tiles*</b> from Sevilla,\nor maybe \u00e9maux \U0001f3e0",
            "2026-12-31T23:59:59.123456+00:00")]}),
    ("notes and no fact", {"query": "renovation"}, {"results": [], "notes": [RENOVATION]}),
    ("more notes than k: k of them", {"query": "kitchen", "k": 2}, {
        "results": [TEA], "notes": [note_hit(i, f"Considering plan {i}.") for i in (1, 2, 3)]}),
]


def search_answer(arguments: dict[str, Any], body: dict[str, Any]) -> str:
    """The Python executor's search_memory answer over an API that answers ``body``."""
    def api(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/consent"):
            return httpx.Response(200, json={"enabled": True, "chosen": True})
        return httpx.Response(200, json=body)

    with MemoryApi("http://memory.test", service_key="mfk_0123456789ab_" + "cd" * 32,
                   transport=httpx.MockTransport(api)) as client:
        return MemoryTools(client, user_id="ada").run("search_memory", arguments)


def render_search() -> str:
    cases = [{"case": label, "arguments": arguments, "api": body,
              "answer": json.loads(search_answer(arguments, body))}
             for label, arguments, body in SEARCH_CASES]
    return json.dumps(cases, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(render(), "utf-8")
    SEARCH_FIXTURE.write_text(render_search(), "utf-8")
    sys.stdout.write(f"wrote {FIXTURE} and {SEARCH_FIXTURE}\n")
