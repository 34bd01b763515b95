"""How long a prompt read took, split at the model call: the ``Server-Timing`` header of
known-facts and search.

    Server-Timing: embed;dur=1.23, store;dur=0.80, total;dur=2.40

in milliseconds: ``embed`` the embeddings call for the query (absent when the read
made none: a user with few enough facts gets them all without one), ``store`` the
read's own time outside that call (PostgreSQL and ranking), ``total`` the handler's
time from after authentication to the answer built. A caller (and bench.prompt_read)
takes the model call apart from what memfleet adds. Only durations: no user content.
"""

from __future__ import annotations

import time

from worker.providers.base import Answer, Embedder, EmbedderFactory
from worker.vectors import Vector

HEADER = "Server-Timing"


def server_timing(*, embed_ms: float | None, store_ms: float, total_ms: float) -> str:
    """The header's value; ``embed_ms`` None: no model call, no ``embed`` metric."""
    parts = [] if embed_ms is None else [f"embed;dur={embed_ms:.2f}"]
    parts += [f"store;dur={store_ms:.2f}", f"total;dur={total_ms:.2f}"]
    return ", ".join(parts)


class _ModelClock:
    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0


class _TimedEmbedder:
    """An embedder whose calls are timed on the read's clock; otherwise the same one."""

    def __init__(self, inner: Embedder, clock: _ModelClock) -> None:
        self._inner, self._clock = inner, clock

    @property
    def provider_name(self) -> str:
        return self._inner.provider_name

    @property
    def model(self) -> str:
        return self._inner.model

    @property
    def dim(self) -> int:
        return self._inner.dim

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        started = time.perf_counter()
        try:
            return await self._inner.embed(texts)
        finally:
            self._clock.calls += 1
            self._clock.seconds += time.perf_counter() - started


class ReadTiming:
    """One read's clock: started when built; read through ``embedder`` and ``embedders``
    (the given ones, timed), call ``read_done`` when the read returns, then ``header``."""

    def __init__(self, embedder: Embedder, embedders: EmbedderFactory | None) -> None:
        self._started = time.perf_counter()
        self._read_s: float | None = None
        self._clock = _ModelClock()
        self.embedder: Embedder = _TimedEmbedder(embedder, self._clock)
        self.embedders: EmbedderFactory | None = None
        if embedders is not None:
            factory = embedders
            self.embedders = lambda model, dim: _TimedEmbedder(factory(model, dim), self._clock)

    @property
    def model_calls(self) -> int:
        return self._clock.calls

    def read_done(self) -> None:
        self._read_s = time.perf_counter() - self._started

    def header(self) -> str:
        total_s = time.perf_counter() - self._started
        read_s = total_s if self._read_s is None else self._read_s
        embed_s = self._clock.seconds
        return server_timing(embed_ms=embed_s * 1000 if self._clock.calls else None,
                             store_ms=max(0.0, read_s - embed_s) * 1000, total_ms=total_s * 1000)
