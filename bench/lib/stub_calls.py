"""The model calls a run made, read off the OpenAI-compatible stub's request log: chat
calls by their wire task, embeddings calls, and the chat requests' input tokens
(tiktoken's cl100k_base, as bench/tokens.py, plus PER_MESSAGE tokens of framing per
chat message). What bench.notes_cost and bench.parts_cost count per committed job."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import tiktoken

from api_stub.llm_stub import StubServer

PER_MESSAGE = 4


def request_tokens(encoding: tiktoken.Encoding, body: dict[str, Any]) -> int:
    return sum(len(encoding.encode(m["content"])) + PER_MESSAGE for m in body["messages"])


def take_calls(stub: StubServer, encoding: tiktoken.Encoding) -> tuple[Counter[str], int]:
    """The calls recorded since the last take (chat calls by task, and "embeddings")
    and the chat requests' input tokens; the stub's log starts empty again."""
    calls: Counter[str] = Counter()
    tokens = 0
    recorded = stub.recorded()
    stub.reset()  # the next take starts from nothing
    for record in recorded:
        if record["path"].endswith("/embeddings"):
            calls["embeddings"] += 1
            continue
        calls[json.loads(record["body"]["messages"][1]["content"])["task"]] += 1
        tokens += request_tokens(encoding, record["body"])
    return calls, tokens
