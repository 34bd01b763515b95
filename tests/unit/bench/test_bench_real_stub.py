"""bench.lib.real_stub answers what the project's stub answers, base64 embeddings included."""

from __future__ import annotations

import base64
import json

import numpy as np

from api_stub.llm_answers import answer_for
from bench.lib.real_stub import FastStub
from worker.providers.hashing import hash_embed
from worker.providers.wire import ExtractionRequest, WireMessage

REQUEST = ExtractionRequest(
    observed_at="2026-11-22 (Sunday)", summary=None, context=(),
    messages=(WireMessage(role="user", content="I live in Lyon. I like green tea."),),
)


def test_embeddings_as_base64_float32_or_floats() -> None:
    stub = FastStub(dim=16)
    texts = ["Lives in Lyon", "Likes green tea"]
    status, body = stub.embeddings({"input": texts, "encoding_format": "base64"})
    assert status == 200
    for text, item in zip(texts, body["data"], strict=True):
        decoded = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        np.testing.assert_array_equal(decoded, np.asarray(hash_embed(text, 16), dtype="<f4"))
    status, floats = stub.embeddings({"input": texts, "dimensions": 8})
    assert [len(item["embedding"]) for item in floats["data"]] == [8, 8]
    assert stub.stats.cache_hits == 0  # another dimension is another vector


def test_chat_answers_are_the_rules_answers_computed_once() -> None:
    stub = FastStub()
    body = {"model": "m", "messages": [{"role": "system", "content": "prompt"},
                                       {"role": "user", "content": REQUEST.model_dump_json()}]}
    first = stub.chat(body)
    second = stub.chat(body)
    assert first[0] == 200 and first[1]["choices"] == second[1]["choices"]
    content = first[1]["choices"][0]["message"]["content"]
    assert json.loads(content) == answer_for(json.loads(REQUEST.model_dump_json()))
    assert stub.stats.cache_hits == 1


def test_requests_it_cannot_answer_are_refused() -> None:
    stub = FastStub()
    assert stub.answer("POST", "/v1/chat/completions", b"not json")[0] == 400
    assert stub.answer("POST", "/v1/embeddings", b'{"input": []}')[0] == 400
    assert stub.answer("GET", "/v1/models", b"")[0] == 404
