"""The Server-Timing value of the prompt reads (worker.api.read_timing)."""

from __future__ import annotations

import asyncio

import numpy as np

from worker.api.read_timing import ReadTiming, server_timing
from worker.providers.base import Answer, Usage
from worker.vectors import Vector


def test_the_value_names_each_part_in_milliseconds_with_two_decimals() -> None:
    assert server_timing(embed_ms=1.234, store_ms=0.8, total_ms=2.4) == (
        "embed;dur=1.23, store;dur=0.80, total;dur=2.40")


def test_a_read_without_a_model_call_has_no_embed_metric() -> None:
    assert server_timing(embed_ms=None, store_ms=0.5, total_ms=0.75) == (
        "store;dur=0.50, total;dur=0.75")


class SlowEmbedder:
    provider_name, model, dim = "test", "m", 2

    def __init__(self, model: str = "m") -> None:
        self.model = model

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        await asyncio.sleep(0.05)
        return Answer(np.zeros((len(texts), 2), dtype=np.float32), Usage(), self.model)


def parts(header: str) -> dict[str, float]:
    return {p.split(";")[0]: float(p.split("=")[1]) for p in header.split(", ")}


async def test_model_calls_through_either_embedder_count_as_embed_not_store() -> None:
    timing = ReadTiming(SlowEmbedder(), lambda model, dim: SlowEmbedder(model))
    assert timing.embedders is not None
    other = timing.embedders("other", 2)
    assert (other.model, other.dim, timing.embedder.model) == ("other", 2, "m")
    await timing.embedder.embed(["a"])
    await other.embed(["b"])
    timing.read_done()
    spans = parts(timing.header())
    assert timing.model_calls == 2
    assert spans["embed"] >= 100 and spans["store"] < 50
    assert spans["total"] >= spans["embed"] + spans["store"] - 0.01


async def test_without_a_model_call_the_read_is_all_store() -> None:
    timing = ReadTiming(SlowEmbedder(), None)
    assert timing.embedders is None
    await asyncio.sleep(0.01)
    timing.read_done()
    spans = parts(timing.header())
    assert set(spans) == {"store", "total"} and spans["store"] >= 10
