"""A zero-latency OpenAI-compatible endpoint for bench.real_path, cheap enough not to be measured.

The answers are the project's stub's (api_stub.llm_answers for chat, the
hashing embedder for embeddings), served by a bare ASGI app instead of the
Starlette one: no fault hooks, no request log, and every answer computed once
per distinct request (chat: per user message; embeddings: per text) and kept.
Embeddings are served as base64 of a little-endian float32 buffer when asked,
as OpenAI and vLLM do, or as lists of floats.

It runs in a process of its own (``python -m bench.lib.real_stub --port N``), so
its work is not the worker's; it times its own handling of each request and
counts the connections it saw, both read from ``GET /_bench/stats``.

    .venv/bin/python -m bench.lib.real_stub --port 8090 [--dim 1536]
"""

from __future__ import annotations

import argparse
import base64
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import uvicorn
from pydantic import ValidationError

from api_stub.llm_answers import answer_for
from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, count_tokens
from worker.providers.hashing import hash_embed

STATS_PATH = "/_bench/stats"
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(slots=True)
class StubStats:
    requests: int = 0
    handler_s: float = 0.0  # from the whole body received to the answer built
    connections: set[tuple[str, int]] = field(default_factory=set)  # client address and port
    cache_hits: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "handler_s": self.handler_s,
                "connections": len(self.connections), "cache_hits": self.cache_hits}


class FastStub:
    """The ASGI app; one instance per process."""

    def __init__(self, dim: int = 1536) -> None:
        self.dim = dim
        self.stats = StubStats()
        self._chat: dict[str, tuple[str, int]] = {}  # user message -> (answer content, tokens)
        self._vectors: dict[tuple[str, int], bytes] = {}  # (text, dim) -> float32 buffer

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = body.get("messages") or []
        user = next((m.get("content") for m in reversed(messages)
                     if isinstance(m, dict) and m.get("role") == "user"), None)
        if not isinstance(user, str):
            return 400, _error("the user message is not a JSON document")
        cached = self._chat.get(user)
        if cached is None:
            try:
                content = json.dumps(answer_for(json.loads(user)))
            except (ValueError, ValidationError):  # JSONDecodeError is a ValueError too
                return 400, _error("the user message is not a known wire request")
            cached = self._chat[user] = (content, count_tokens(content))
        else:
            self.stats.cache_hits += 1
        content, completion = cached
        prompt = sum(count_tokens(str(m.get("content", ""))) for m in messages)
        return 200, {
            "id": f"chatcmpl-bench-{self.stats.requests}", "object": "chat.completion",
            "created": 0, "model": str(body.get("model", "stub")),
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": content,
                                     "refusal": None}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        }

    def vector(self, text: str, dim: int) -> bytes:
        key = (text, dim)
        found = self._vectors.get(key)
        if found is None:
            found = self._vectors[key] = np.asarray(hash_embed(text, dim), dtype="<f4").tobytes()
        else:
            self.stats.cache_hits += 1
        return found

    def embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return 400, _error("input must be a string or a non-empty list of strings")
        dim = int(body.get("dimensions") or self.dim)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            buffer = self.vector(text, dim)
            embedding: str | list[float] = (
                base64.b64encode(buffer).decode("ascii") if as_base64
                else np.frombuffer(buffer, dtype="<f4").tolist())
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(count_tokens(t) for t in texts)
        return 200, {"object": "list", "data": data, "model": str(body.get("model", "stub")),
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def answer(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path == STATS_PATH:
            return 200, self.stats.as_json()
        if method == "DELETE" and path == STATS_PATH:
            self.stats = StubStats()
            return 200, self.stats.as_json()
        if method != "POST" or path not in (CHAT_PATH, EMBED_PATH):
            return 404, _error("unknown path")
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, _error("the body is not JSON")
        if not isinstance(body, dict):
            return 400, _error("the body is not a JSON object")
        return self.chat(body) if path == CHAT_PATH else self.embeddings(body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        began = time.perf_counter()
        path = str(scope["path"])
        status, document = self.answer(str(scope["method"]), path, b"".join(chunks))
        payload = json.dumps(document).encode()
        if path != STATS_PATH:
            self.stats.requests += 1
            self.stats.handler_s += time.perf_counter() - began
            client = scope.get("client")
            if client:
                self.stats.connections.add((str(client[0]), int(client[1])))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": None}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lib.real_stub", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dim", type=int, default=1536)
    args = parser.parse_args(argv)
    uvicorn.run(FastStub(args.dim), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False, lifespan="off", loop="uvloop", http="httptools")


if __name__ == "__main__":
    main()
