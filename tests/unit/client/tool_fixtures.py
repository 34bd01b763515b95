"""The memory tools' validation cases, with the Python executor's answers, for the
TypeScript executor to match (clients/typescript/src/test/unit/tools.test.ts):

    python -m tests.unit.client.tool_fixtures    # rewrite the file

Each case is a tool name and arguments (a string as the model sends them, or an
object) and the answer: the checked arguments, or the error code and message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from worker.api.memory_models import MAX_FACT_CHARS, MAX_QUERY_CHARS
from worker.client.memory_tools import ToolArguments, validate_arguments

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "tools" / "validation.json"

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


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(render(), "utf-8")
    sys.stdout.write(f"wrote {FIXTURE}\n")
