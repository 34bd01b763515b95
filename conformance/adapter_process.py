"""The suite's side of the adapter protocol: one adapter process, requests out,
replies in, each within a time bound (docs/conformance.md, "The adapter protocol").

An adapter that dies, stays silent past the bound, or answers anything but one JSON
object with the request's id is an AdapterBroken: the check that asked fails with
that reason, and the next check gets a fresh process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
from collections import deque
from pathlib import Path
from typing import Any

REQUEST_TIMEOUT_S = 10.0
ERROR_KINDS = frozenset({
    "InvalidHandover", "HandoverTooLarge", "HandoverBacklogFull", "SessionBytesFull",
    "UserSessionsFull", "HandoverUnavailable", "Unsupported", "BadRequest",
})
_STDERR_KEPT = 20  # lines of the adapter's stderr quoted when it breaks
_LINE_LIMIT = 16 * 1024 * 1024  # a reply may carry many events


class AdapterBroken(Exception):
    """The adapter broke the protocol itself: died, hung, or answered garbage."""


class AdapterError(Exception):
    """The adapter answered ``ok: false``: ``kind`` is one of ERROR_KINDS."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


class AdapterProcess:
    """One running adapter: ``await call({"op": ...})`` returns its ``result``."""

    def __init__(self, command: str, *, cwd: Path, env: dict[str, str]) -> None:
        self.command, self.cwd, self.env = command, cwd, env
        self._proc: asyncio.subprocess.Process | None = None
        self._next_id = 0
        self._stderr: deque[str] = deque(maxlen=_STDERR_KEPT)
        self._stderr_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        argv = shlex.split(self.command)
        if not argv:
            raise AdapterBroken("the adapter command is empty")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv, cwd=self.cwd, env=self.env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                limit=_LINE_LIMIT,
                # Its own process group: a stop ends what it started too (a shell, npx),
                # whose open pipes would otherwise keep the suite waiting.
                start_new_session=True)
        except OSError as exc:
            raise AdapterBroken(f"the adapter did not start: {exc}") from exc
        self._stderr_task = asyncio.create_task(self._keep_stderr())

    async def _keep_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while line := await self._proc.stderr.readline():
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def _died(self, what: str) -> AdapterBroken:
        tail = " | ".join(self._stderr) or "no stderr"
        code = None if self._proc is None else self._proc.returncode
        return AdapterBroken(f"{what} (exit {code}; stderr: {tail[-600:]})")

    async def call(self, request: dict[str, Any], *, timeout_s: float = REQUEST_TIMEOUT_S
                   ) -> dict[str, Any]:
        """Send ``request`` (an ``id`` is added); the reply's ``result`` object, or
        AdapterError for ``ok: false``, or AdapterBroken."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None or not self.alive:
            raise self._died("the adapter is not running")
        self._next_id += 1
        request_id = self._next_id
        # ASCII: a lone surrogate (a check sends one on purpose) travels as a \ud800
        # escape, which every JSON parser reads back; as bytes it would not be UTF-8.
        line = json.dumps({"id": request_id, **request}) + "\n"
        try:
            proc.stdin.write(line.encode("ascii"))
            await proc.stdin.drain()
            raw = await asyncio.wait_for(proc.stdout.readline(), timeout_s)
        except TimeoutError:
            await self.stop()  # its late reply would answer the next request
            raise AdapterBroken(
                f"no reply to {request['op']!r} within {timeout_s:g} s") from None
        except (OSError, ValueError) as exc:  # a broken pipe; a line over the limit
            await self.stop()
            raise self._died(f"{request['op']!r}: {type(exc).__name__}") from exc
        if not raw:
            await self._reap()
            raise self._died(f"the adapter closed stdout on {request['op']!r}")
        return _result(raw, request_id, request["op"])

    async def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 2)

    async def stop(self) -> None:
        """Kill the process (a well-behaved one is sent ``shutdown`` first: ``close``)."""
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group's id is the adapter's pid
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._stderr_task, 2)

    async def close(self) -> int | None:
        """``shutdown``, then the exit code (killed after 5 s)."""
        if self.alive:
            with contextlib.suppress(AdapterBroken, AdapterError):
                await self.call({"op": "shutdown"}, timeout_s=5)
            assert self._proc is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 5)
        code = None if self._proc is None else self._proc.returncode
        await self.stop()
        return code


def _result(raw: bytes, request_id: int, op: str) -> dict[str, Any]:
    try:
        reply = json.loads(raw)
    except ValueError:
        shown = raw[:120].decode("utf-8", "replace").rstrip("\n")
        raise AdapterBroken(f"reply to {op!r} is not JSON: {shown!r}") from None
    if not isinstance(reply, dict) or reply.get("id") != request_id:
        raise AdapterBroken(f"reply to {op!r} (id {request_id}) has another id: {raw[:120]!r}")
    result = reply.get("result")
    if reply.get("ok") is True and isinstance(result, dict):
        return result
    error = reply.get("error")
    if reply.get("ok") is False and isinstance(error, dict) \
            and error.get("kind") in ERROR_KINDS and isinstance(error.get("message"), str):
        raise AdapterError(error["kind"], error["message"])
    raise AdapterBroken(f"reply to {op!r} is not of the protocol's shape: {raw[:160]!r}")


def adapter_env(root: Path) -> dict[str, str]:
    """The suite's environment with the repository on PYTHONPATH (for Python adapters)
    and no MEMFLEET_* setting: an adapter is configured by ``configure`` alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env
