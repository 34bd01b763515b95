"""Embed stage: every candidate of the run in ONE embeddings call."""

from __future__ import annotations

from collections.abc import Sequence

from worker.errors import ProviderAnswerInvalid
from worker.pipeline.context import RunContext, ask
from worker.pipeline.extract import CandidateFact
from worker.vectors import Vector, empty


async def run(ctx: RunContext, candidates: Sequence[CandidateFact]) -> Vector:
    """A float32 matrix, one unit-length row per candidate, in their order."""
    embedder = ctx.providers.embedder
    if not candidates:
        return empty(embedder.dim)
    texts = [c.text for c in candidates]
    with ctx.clock.stage("embed"):
        answer = await ask(ctx, "embeddings", embedder, lambda: embedder.embed(texts))
    if answer.value.shape != (len(candidates), embedder.dim):
        raise ProviderAnswerInvalid("the embeddings do not match the request")
    # The similarity, the neighbour query and the inserts all read this matrix as it is.
    return answer.value
