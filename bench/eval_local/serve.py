"""The bench's model endpoint, run by the bench virtualenv's python (servers.py starts it).

    VENV/bin/python serve.py --model FILE.gguf --port P --upstream-port Q --calls CALLS.jsonl

Two servers in one process, both on 127.0.0.1:

- llama.cpp's OpenAI-compatible server (xllamacpp, its C++ server in threads of this
  process) on the upstream port: the chat model, one slot, a bounded answer;
- in front of it, on ``--port``, a small HTTP server of ours: ``/v1/embeddings`` answered
  by memfleet's own all-MiniLM-L6-v2 (worker.providers.local_embed, 384 wide), so every
  system gets the same vectors through the same door; ``/v1/chat/completions`` passed to
  llama.cpp unchanged, each call written to CALLS (the request, the answer, the seconds)
  for the bench's error counts and timings (calls.py); ``/health`` once both are up.

The CALLS file holds the scenarios' text: it lives in the bench's temporary folder.
Imports memfleet's module from the repository (PYTHONPATH), numpy, tokenizers,
safetensors and xllamacpp: the bench virtualenv (requirements.txt).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 64 << 20
CHAT_TIMEOUT_S = 3600.0


def split_system(path: str) -> tuple[str, str]:
    """``/sys/NAME/v1/...`` -> (NAME, ``/v1/...``): each system is given a base URL of its
    own on the one endpoint, so every call is recorded under the system that made it."""
    if path.startswith("/sys/"):
        name, _, rest = path[len("/sys/"):].partition("/")
        return name, "/" + rest
    return "", path


class Front(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream: str, calls: str, embed_model: str) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.upstream, self.embed_model = upstream, embed_model
        self.calls = open(calls, "a", encoding="utf-8")  # noqa: SIM115 - closed at exit
        self.lock = threading.Lock()

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.calls.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.calls.flush()


class Handler(BaseHTTPRequestHandler):
    server: Front

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no request lines: the calls file is the record

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._reply(status, json.dumps({"error": {"message": message}}).encode())

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/health", "/v1/health"):
            try:
                with urllib.request.urlopen(  # noqa: S310 - our loopback upstream
                        self.server.upstream + "/health", timeout=5) as r:
                    self._reply(r.status, r.read())
            except (urllib.error.URLError, OSError) as exc:
                self._error(503, f"llama.cpp not ready: {exc}")
            return
        self._error(404, "not found")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(413, "body too large")
            return
        raw = self.rfile.read(length)
        system, path = split_system(self.path.rstrip("/"))
        if path in ("/v1/embeddings", "/embeddings"):
            self._embeddings(raw, system)
        elif path in ("/v1/chat/completions", "/chat/completions"):
            self._chat(raw, system)
        else:
            self._error(404, "not found")

    def _embeddings(self, raw: bytes, system: str) -> None:
        from worker.providers.local_embed import _load, encode

        try:
            request = json.loads(raw)
            texts = request["input"]
            texts = [texts] if isinstance(texts, str) else list(texts)
            if not all(isinstance(t, str) for t in texts):
                raise ValueError("input must be text")
        except (ValueError, KeyError, TypeError) as exc:
            self._error(400, f"bad embeddings request: {exc}")
            return
        rows = encode(_load(), texts)
        as_base64 = request.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": (base64.b64encode(row.astype("<f4").tobytes()).decode()
                               if as_base64 else [float(v) for v in row])}
                for i, row in enumerate(rows)]
        tokens = sum(len(t.split()) for t in texts)
        self.server.record({"at": time.time(), "system": system, "embeddings": len(texts)})
        self._reply(200, json.dumps({
            "object": "list", "data": data, "model": self.server.embed_model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode())

    def _chat(self, raw: bytes, system: str) -> None:
        started, at = time.monotonic(), time.time()
        request = urllib.request.Request(  # noqa: S310 - our loopback upstream
            self.server.upstream + "/v1/chat/completions",
            data=raw, method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=CHAT_TIMEOUT_S) as r:  # noqa: S310
                status, body = r.status, r.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            status, body = 502, json.dumps({"error": {"message": str(exc)}}).encode()
        seconds = time.monotonic() - started
        try:
            answer: Any = json.loads(body)
        except ValueError:
            answer = {"unreadable": body[:200].decode("utf-8", "replace")}
        try:
            asked: Any = json.loads(raw)
        except ValueError:
            asked = None
        self.server.record({"at": at, "system": system, "seconds": round(seconds, 3),
                            "status": status,
                            "request": asked, "response": answer})
        self._reply(status, body)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--calls", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--max-answer-tokens", type=int, default=1024)
    parser.add_argument("--embed-model", default="all-MiniLM-L6-v2")
    args = parser.parse_args()

    import xllamacpp as xlc  # type: ignore[import-not-found]  # the bench venv only

    from worker.providers.local_embed import _load

    params = xlc.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_predict = args.max_answer_tokens  # a runaway answer ends, cut off
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = args.upstream_port
    params.cache_prompt = True
    server = xlc.Server(params)  # loads the model; serves from its own threads
    _load()  # the embedder's weights, before /health says yes
    front = Front(args.port, f"http://127.0.0.1:{args.upstream_port}", args.calls,
                  args.embed_model)
    print(f"serving on 127.0.0.1:{args.port} (llama.cpp on {server.listening_address})",
          flush=True)
    try:
        front.serve_forever()
    finally:
        front.calls.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
