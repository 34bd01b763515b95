"""An OpenAI-compatible stub of chat completions and embeddings, for tests and demos.

Deterministic: chat answers come from the offline ``rules`` provider (and its
question-answering rules, worker.eval.qa_rules), chosen by
the ``task`` of the JSON user message (docs/llm_wire.md), and embeddings
from the ``hashing`` embedder. Token usage is counted as
ceil(characters / 4) per text (tiktoken is not a dependency), which is stable
across runs and close enough to real counts for accounting tests.

Test hooks, over HTTP:
  GET|DELETE /_stub/requests  the request bodies received (with path, key, time)
  POST|GET|DELETE /_stub/faults  queue faults; POST takes one object or a list:
      {"mode": "429", "count": 2, "retry_after": 1, "path": "/v1/chat/completions"}
      mode: an HTTP status ("429", "500", "401", ...), "timeout" (sleep ``sleep_s``,
      default 10, before answering), "latency_ms" (answered ``latency_ms`` after
      the request arrived), "hold" (answered once POST /_stub/release comes, or
      after ``sleep_s``: a test that must act while a call is in flight),
      "truncated", "schema_break", "unknown_ids", "aimed_ids" (with "targets":
      [ids]), "prose", "hostile", "quoting_break", "oversized", "extra_keys", "runaway"
      (cut at the token limit: finish reason "length") (chat; see
      api_stub/llm_answers.py), "wrong_count", "wrong_dim" (embeddings). Optional:
      "path", "task", "retry_after" (header value), "retry_after_ms", "echo" (an
      HTTP-status fault's message quotes the request body). Each fault applies to
      the next ``count`` matching requests (default 1), first queued first.
  POST /_stub/config  {"reject_json_schema": true, "dim": 256}
  POST|GET|DELETE /_stub/script  scripted chat answers, for a test of a model's tool
      calls (docs/tools.md): POST takes one answer or a list, each answering the
      next chat request whatever it holds, first queued first:
      {"content": "text or null", "tool_calls": [{"name": "search_memory",
       "arguments": {"query": "tea"}, "id": "call_1"}]}  (arguments: an object,
      sent as its JSON, or a string sent as it is; id: default call_<n>)
  POST /_stub/reset   forget requests, faults and scripted answers, restore the config
  POST /_stub/release answer the requests a "hold" fault holds

Run: ``python -m api_stub.llm_stub --port 8089`` (loopback only), or in-process
with ``StubServer`` (a uvicorn thread on a free port of 127.0.0.1).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import socket
import threading
import time
import urllib.request
from collections import deque
from dataclasses import asdict
from typing import Any

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api_stub.llm_answers import CUT_OFF_MODES, answer_for, faulty_content
from api_stub.llm_faults import Fault, answered_after_latency, error_response, status_fault
from api_stub.llm_mem0 import mem0_answer
from worker.providers.hashing import hash_embed, hash_embed_matrix

CHAT_PATH = "/v1/chat/completions"
EMBED_PATH = "/v1/embeddings"


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class StubState:
    """What the stub remembers; guarded by a lock since tests read it from other threads."""

    def __init__(self, dim: int = 1536, reject_json_schema: bool = False) -> None:
        self._lock = threading.Lock()
        self._defaults = (dim, reject_json_schema)
        self.dim, self.reject_json_schema = dim, reject_json_schema
        # Bounded, so a long-running CLI stub does not grow without end. Bodies are
        # kept as received and parsed when read: parsed, a full log is objects that
        # every full garbage collection of the process walks, pausing the answers.
        self.requests: deque[dict[str, Any]] = deque(maxlen=10_000)
        self.faults: list[Fault] = []
        self.scripted: deque[dict[str, Any]] = deque()
        self.served = 0
        # Set by POST /_stub/release: what a "hold" fault waits for.
        self.released = threading.Event()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.faults.clear()
            self.scripted.clear()
            self.released.set()  # nothing stays held past a reset
            self.dim, self.reject_json_schema = self._defaults

    def record(self, path: str, raw_body: bytes, authorization: str | None) -> int:
        with self._lock:
            self.served += 1
            self.requests.append({
                "path": path, "body": raw_body, "authorization": authorization,
                "at": time.monotonic(),
            })
            return self.served

    def recorded(self, clear: bool = False) -> list[dict[str, Any]]:
        """Every request kept, its body parsed (None: not a JSON object)."""
        with self._lock:
            seen = list(self.requests)
            if clear:
                self.requests.clear()
        return [{**entry, "body": json_object(entry["body"])} for entry in seen]

    def queue(self, faults: list[Fault] | None) -> list[dict[str, Any]]:
        """Append ``faults`` (None: clear them all); the faults still queued."""
        with self._lock:
            if faults is None:
                self.faults.clear()
            else:
                self.faults.extend(faults)
                if any(f.mode == "hold" for f in faults):
                    self.released.clear()
            return [asdict(f) for f in self.faults]

    def script(self, answers: list[dict[str, Any]] | None) -> int:
        """Queue scripted chat answers (None: clear them); how many are queued."""
        messages = None if answers is None else [scripted_message(a) for a in answers]
        with self._lock:
            if messages is None:
                self.scripted.clear()
            else:
                self.scripted.extend(messages)
            return len(self.scripted)

    def next_scripted(self) -> dict[str, Any] | None:
        with self._lock:
            return self.scripted.popleft() if self.scripted else None

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if "reject_json_schema" in body:
                self.reject_json_schema = bool(body["reject_json_schema"])
            if "dim" in body:
                self.dim = int(body["dim"])
            return {"dim": self.dim, "reject_json_schema": self.reject_json_schema}

    def take_fault(self, path: str, task: str | None) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.path in (None, path) and fault.task in (None, task):
                    fault.count -= 1
                    if fault.count == 0:
                        self.faults.remove(fault)
                    return fault
            return None


def _wire_payload(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON document of the last user message, if there is one."""
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1].get("content"), str):
        return None
    try:
        payload = json.loads(users[-1]["content"])
    except json.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


def scripted_message(answer: Any) -> dict[str, Any]:
    """A scripted answer (see the module docstring) as the assistant message it sends;
    ValueError when it is not one."""
    if not isinstance(answer, dict) or not set(answer) <= {"content", "tool_calls"}:
        raise ValueError("a scripted answer is an object of content and tool_calls")
    content = answer.get("content")
    calls = answer.get("tool_calls") or []
    if not (content is None or isinstance(content, str)) or not isinstance(calls, list):
        raise ValueError("content is a string or null, tool_calls a list")
    if content is None and not calls:
        raise ValueError("a scripted answer needs content or tool_calls")
    tool_calls = []
    for n, call in enumerate(calls, 1):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError("a tool call names its function")
        arguments = call.get("arguments", {})
        tool_calls.append({
            "id": str(call.get("id", f"call_{n}")), "type": "function",
            "function": {"name": call["name"], "arguments": arguments
                         if isinstance(arguments, str) else json.dumps(arguments)},
        })
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _completion(number: int, model: str, content: str, prompt_tokens: int,
                finish_reason: str = "stop",
                message: dict[str, Any] | None = None) -> dict[str, Any]:
    completion_tokens = count_tokens(content)
    return {
        "id": f"chatcmpl-stub-{number}", "object": "chat.completion", "created": number,
        "model": model, "system_fingerprint": "memfleet-llm-stub",
        "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                     "message": message or {"role": "assistant", "content": content,
                                            "refusal": None}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def json_object(raw: bytes) -> dict[str, Any] | None:
    """``raw`` parsed, if it is a JSON object."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


async def _json_body(request: Request) -> dict[str, Any] | None:
    return json_object(await request.body())


def _state(request: Request) -> StubState:
    state: StubState = request.app.state.stub
    return state


@answered_after_latency
async def chat_completions(request: Request) -> Response:
    state = _state(request)
    raw_body = await request.body()
    number = state.record(CHAT_PATH, raw_body, request.headers.get("authorization"))
    body = json_object(raw_body)
    if body is None:
        return error_response(400, "the body is not a JSON object")
    payload = _wire_payload(body)
    fault = state.take_fault(CHAT_PATH, payload.get("task") if payload else None)
    failed = await status_fault(request, fault)
    if failed is not None:
        return failed
    scripted = state.next_scripted()
    if scripted is not None:  # a test's model turn: its text or tool calls, as queued
        prompt = sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
        said = (scripted["content"] or "") + json.dumps(scripted.get("tool_calls", []))
        finish = "tool_calls" if "tool_calls" in scripted else "stop"
        return JSONResponse(_completion(number, str(body.get("model", "stub")), said, prompt,
                                        finish, scripted))
    response_format = body.get("response_format") or {}
    if state.reject_json_schema and response_format.get("type") == "json_schema":
        return error_response(400, "response_format json_schema is not supported",
                              "response_format")
    mem0 = mem0_answer(body) if payload is None else None  # mem0's own prompts (llm_mem0)
    if payload is None and mem0 is None:
        return error_response(400, "the user message is not a JSON document", "messages")
    try:
        answer = mem0 if mem0 is not None else answer_for(payload or {})
    except (ValueError, ValidationError):  # ValidationError is a ValueError; said for clarity
        return error_response(400, "the user message is not a known wire request", "messages")
    mode = fault.mode if fault is not None else ""
    content = faulty_content(mode, payload or {}, answer,
                             fault.targets if fault is not None else None)
    prompt = sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
    finish = "length" if mode in CUT_OFF_MODES else "stop"
    return JSONResponse(_completion(number, str(body.get("model", "stub")), content, prompt,
                                    finish))


def _encoded(texts: list[str], dim: int, encoding: str) -> list[list[float]] | list[str]:
    """Each text's hashed vector: float lists, or base64 of its little-endian float32s
    (built with numpy: the stub's own time is not what a bench should measure)."""
    if encoding == "base64":
        matrix = hash_embed_matrix(texts, dim).astype("<f4", copy=False)
        return [base64.b64encode(row.tobytes()).decode("ascii") for row in matrix]
    return [hash_embed(text, dim) for text in texts]


@answered_after_latency
async def embeddings(request: Request) -> Response:
    state = _state(request)
    raw_body = await request.body()
    state.record(EMBED_PATH, raw_body, request.headers.get("authorization"))
    body = json_object(raw_body)
    if body is None:
        return error_response(400, "the body is not a JSON object")
    fault = state.take_fault(EMBED_PATH, None)
    failed = await status_fault(request, fault)
    if failed is not None:
        return failed
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return error_response(400, "input must be a string or a non-empty list of strings", "input")
    dim = int(body.get("dimensions") or state.dim)
    if fault is not None and fault.mode == "wrong_dim":
        dim -= 1
    if fault is not None and fault.mode == "wrong_count":
        texts = texts[:-1]
    encoding = str(body.get("encoding_format") or "float")
    data = [{"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(_encoded(texts, dim, encoding))]
    tokens = sum(count_tokens(t) for t in texts)
    return JSONResponse({"object": "list", "data": data, "model": str(body.get("model", "stub")),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


async def stub_control(request: Request) -> Response:
    """The test hooks under /_stub/ (see the module docstring)."""
    state, what = _state(request), request.url.path.rsplit("/", 1)[-1]
    if what == "requests":
        return JSONResponse({"requests": state.recorded(clear=request.method == "DELETE")})
    if what == "config":
        return JSONResponse(state.configure(await _json_body(request) or {}))
    if what == "reset":
        state.reset()
        return JSONResponse({"reset": True})
    if what == "script":
        if request.method != "POST":  # GET: how many are queued; DELETE clears
            return JSONResponse({"queued": state.script(
                None if request.method == "DELETE" else [])})
        try:
            raw = await request.json()
            queued = state.script(raw if isinstance(raw, list) else [raw])
        except ValueError as exc:
            return error_response(400, f"bad scripted answer: {exc}")
        return JSONResponse({"queued": queued})
    if what == "release":
        state.released.set()
        return JSONResponse({"released": True})
    if request.method != "POST":  # faults: GET lists, DELETE clears
        return JSONResponse({"faults": state.queue(None if request.method == "DELETE" else [])})
    try:
        raw = await request.json()
        faults = [Fault.parse(item) for item in (raw if isinstance(raw, list) else [raw])]
    except (ValueError, TypeError, AttributeError) as exc:
        return error_response(400, f"bad fault: {exc}")
    return JSONResponse({"faults": state.queue(faults)})


def create_app(state: StubState | None = None) -> Starlette:
    app = Starlette(routes=[
        Route(CHAT_PATH, chat_completions, methods=["POST"]),
        Route(EMBED_PATH, embeddings, methods=["POST"]),
        Route("/_stub/requests", stub_control, methods=["GET", "DELETE"]),
        Route("/_stub/faults", stub_control, methods=["GET", "POST", "DELETE"]),
        Route("/_stub/config", stub_control, methods=["POST"]),
        Route("/_stub/script", stub_control, methods=["GET", "POST", "DELETE"]),
        Route("/_stub/reset", stub_control, methods=["POST"]),
        Route("/_stub/release", stub_control, methods=["POST"]),
    ])
    app.state.stub = state or StubState()
    return app


class StubServer:
    """The stub on a free loopback port in a background thread: ``with StubServer() as s``."""

    def __init__(self, *, dim: int = 1536, reject_json_schema: bool = False) -> None:
        self.state = StubState(dim, reject_json_schema)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.url = ""

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def start(self, timeout_s: float = 10.0) -> str:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            create_app(self.state), log_level="warning", access_log=False, lifespan="off",
            # A "timeout" fault may still be sleeping at stop: do not wait for it.
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="llm-stub", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError("the LLM stub did not start")
            time.sleep(0.01)
        self._server, self._thread, self._socket = server, thread, sock
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        self.state.released.set()  # a held request must not keep the server's thread
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> StubServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Control over HTTP, as an out-of-process test would do it.
    def control(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(  # noqa: S310 - our own loopback URL
            self.url + path, data=data, method=method,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as response:  # noqa: S310
            return json.loads(response.read())

    def add_fault(self, mode: str, **options: Any) -> None:
        self.control("POST", "/_stub/faults", {"mode": mode, **options})

    def recorded(self) -> list[dict[str, Any]]:
        return list(self.control("GET", "/_stub/requests")["requests"])

    def reset(self) -> None:
        self.control("POST", "/_stub/reset")

    def release(self) -> None:
        """Answer the requests a "hold" fault holds."""
        self.control("POST", "/_stub/release")

    def configure(self, **options: Any) -> None:
        self.control("POST", "/_stub/config", options)

    def script(self, *answers: dict[str, Any]) -> int:
        """Queue scripted chat answers (the module docstring); how many are queued."""
        return int(self.control("POST", "/_stub/script", list(answers))["queued"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible LLM stub for memfleet")
    parser.add_argument("--host", default="127.0.0.1", help="loopback by default")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--dim", type=int, default=1536, help="embedding size without `dimensions`")
    parser.add_argument("--reject-json-schema", action="store_true",
                        help="answer 400 to response_format json_schema, like older servers")
    args = parser.parse_args(argv)
    app = create_app(StubState(args.dim, args.reject_json_schema))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
