"""Start the bench's model endpoint (serve.py) on free loopback ports, wait until it
answers, stop it: SIGTERM to its process group, SIGKILL after a grace period."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from worker.embedded.process import free_port, log_tail, pid_state, wait_for

ROOT = Path(__file__).resolve().parents[2]
SERVE = Path(__file__).resolve().parent / "serve.py"
START_TIMEOUT_S = 300.0  # loading a gigabyte of weights on a busy machine
STOP_GRACE_S = 20.0


class EndpointError(RuntimeError):
    """The endpoint did not come up; the message carries its log's tail."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str  # http://127.0.0.1:PORT/v1, chat and embeddings
    calls: Path  # the chat calls, one JSON line each (serve.py)
    pid: int


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - loopback
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    """The server's whole group (it runs in a session of its own), politely first."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def model_endpoint(python: Path, model: Path, work: Path, *, threads: int = 1,
                   ctx: int = 8192) -> Iterator[Endpoint]:
    """serve.py under the bench virtualenv's ``python``, stopped whatever happens."""
    port, upstream = free_port(), free_port()
    while upstream == port:
        upstream = free_port()
    calls, log = work / "calls.jsonl", work / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
           # numpy (the embedder) keeps to the threads the model is given
           "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    argv = [str(python), str(SERVE), "--model", str(model), "--port", str(port),
            "--upstream-port", str(upstream), "--calls", str(calls),
            "--threads", str(threads), "--ctx", str(ctx)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,  # noqa: S603
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        health = f"http://127.0.0.1:{port}/health"
        up = wait_for(lambda: proc.poll() is not None or _healthy(health), START_TIMEOUT_S)
        if not up or proc.poll() is not None or pid_state(proc.pid) != "alive":
            raise EndpointError(f"the model endpoint did not start within "
                                f"{START_TIMEOUT_S:.0f} s:\n{log_tail(log)}")
        yield Endpoint(f"http://127.0.0.1:{port}/v1", calls, proc.pid)
    finally:
        stop(proc)
