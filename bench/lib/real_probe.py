"""Where a provider call's time goes: perf_counter around its pieces, by wrapping them.

While installed, the probe replaces a few functions of the openai client and
of memfleet's providers with timed wrappers (restored on exit) and records
each run as (piece, wall-clock start, duration). bench.real_path runs one job
at a time, so a piece belongs to the job whose span holds its start.

The pieces do not nest inside one another; what the provider-call span holds
besides them (the client's request plumbing, retries, the span itself) is
what is left when they are subtracted. A function missing in this revision
of the worker or of the client is skipped, so the probe runs on every
revision A/B'd.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.lib.spans import JobTiming

HTTP = "HTTP round trip (client send to body read)"
OPENAI_BUILD = "openai: request built and serialised to JSON"
OPENAI_PROCESS = "openai: response turned into its result"
MEMFLEET_BUILD = "memfleet: request document and response_format"
MEMFLEET_READ = "memfleet: answer parsed and validated"

# (module, attribute path, piece). Module-level functions are wrapped where the
# providers look them up (their own module's globals).
TARGETS: tuple[tuple[str, str, str], ...] = (
    ("httpx2", "AsyncClient.send", HTTP),
    ("httpx", "AsyncClient.send", HTTP),
    ("openai._base_client", "AsyncAPIClient._build_request", OPENAI_BUILD),
    ("openai._base_client", "AsyncAPIClient._process_response", OPENAI_PROCESS),
    ("openai._legacy_response", "LegacyAPIResponse.parse", OPENAI_PROCESS),
    ("worker.providers.openai_chat", "build_messages", MEMFLEET_BUILD),
    ("worker.providers.openai_chat", "response_format", MEMFLEET_BUILD),
    ("worker.providers.openai_chat", "content_of", MEMFLEET_READ),
    ("worker.providers.openai_chat", "parse_answer", MEMFLEET_READ),
    ("worker.providers.openai_chat", "parse_completion", MEMFLEET_READ),
    ("worker.providers.openai_embed", "unit_vectors", MEMFLEET_READ),
    ("worker.providers.openai_embed", "parse_embeddings", MEMFLEET_READ),
)
PIECES = (HTTP, OPENAI_BUILD, OPENAI_PROCESS, MEMFLEET_BUILD, MEMFLEET_READ)


@dataclass(slots=True)
class Probe:
    events: list[tuple[str, int, float]] = field(default_factory=list)  # piece, start ns, ms

    def _wrap(self, fn: Any, piece: str) -> Any:
        events = self.events
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                wall, began = time.time_ns(), time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    events.append((piece, wall, (time.perf_counter() - began) * 1e3))
            return timed_async

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            wall, began = time.time_ns(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                events.append((piece, wall, (time.perf_counter() - began) * 1e3))
        return timed

    @contextlib.contextmanager
    def installed(self) -> Iterator[list[str]]:
        """Wrap every target found; yields the ones wrapped, as "module:attribute"."""
        undo: list[tuple[Any, str, Any]] = []
        wrapped: list[str] = []
        try:
            for module_name, path, piece in TARGETS:
                owner: Any = importlib.import_module(module_name)
                *parents, name = path.split(".")
                for parent in parents:
                    owner = getattr(owner, parent, None)
                original = getattr(owner, name, None) if owner is not None else None
                if original is None:
                    continue
                undo.append((owner, name, original))
                setattr(owner, name, self._wrap(original, piece))
                wrapped.append(f"{module_name}:{path}")
            yield wrapped
        finally:
            for owner, name, original in reversed(undo):
                setattr(owner, name, original)

    def per_job(self, timings: Sequence[JobTiming]) -> list[dict[str, float]]:
        """Each job's ms per piece, in the order of ``timings`` (jobs must not overlap)."""
        spans = sorted(range(len(timings)), key=lambda i: timings[i].start_ns)
        out: list[dict[str, float]] = [defaultdict(float) for _ in timings]
        events = sorted(self.events, key=lambda e: e[1])
        at = 0
        for index in spans:
            timing = timings[index]
            while at < len(events) and events[at][1] < timing.start_ns:
                at += 1
            while at < len(events) and events[at][1] <= timing.end_ns:
                piece, _, duration = events[at]
                out[index][piece] += duration
                at += 1
        return [dict(d) for d in out]
