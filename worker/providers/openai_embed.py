"""Embeddings over an OpenAI-compatible ``POST /v1/embeddings`` endpoint.

All of a job's texts go in one call (a list ``input``). The answer is checked
before anyone stores it: one vector per text, each of the configured dimension
(a mismatch is a configuration error: the database column has that size) and
finite. Vectors are L2-normalised here because not every server does it and the
neighbour search assumes unit length.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np
import openai
from openai.types import CreateEmbeddingResponse

from worker.budget import estimate_tokens
from worker.errors import ConfigurationError, ProviderAnswerInvalid
from worker.providers.base import Answer, Usage
from worker.providers.retry import RetryPolicy, Sleep, call_with_retry
from worker.vectors import Vector, empty

_WHAT = "the embeddings endpoint"
# Families known to take a ``dimensions`` argument; others reject it.
_DIMENSION_PREFIXES = ("text-embedding-3",)


def accepts_dimensions(model: str) -> bool:
    return model.startswith(_DIMENSION_PREFIXES)


@dataclass(frozen=True, slots=True)
class EmbedOptions:
    base_url: str
    api_key: str
    model: str
    dim: int
    send_dimensions: bool | None = None  # None: by model family
    timeout_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


def unit_vectors(response: CreateEmbeddingResponse, count: int, dim: int) -> Vector:
    """The response's vectors in input order, checked and scaled to unit length."""
    if len(response.data) != count:
        raise ProviderAnswerInvalid(
            f"the embeddings endpoint returned {len(response.data)} vectors for {count} texts"
        )
    ordered = sorted(response.data, key=lambda item: item.index)
    if [item.index for item in ordered] != list(range(count)):
        raise ProviderAnswerInvalid("the embeddings endpoint returned unexpected indexes")
    for item in ordered:
        if len(item.embedding) != dim:
            raise ConfigurationError(
                f"the embeddings model returned {len(item.embedding)} dimensions,"
                f" MEMFLEET_EMBED_DIM is {dim}: set the dimension the model produces"
            )
    # float64 for the norms, so a vector of tiny or huge values still scales right.
    matrix = np.asarray([item.embedding for item in ordered], dtype=np.float64).reshape(count, dim)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise ProviderAnswerInvalid("the embeddings endpoint returned a zero or NaN vector")
    unit: Vector = (matrix / norms).astype(np.float32)
    return unit


def used_tokens(response: CreateEmbeddingResponse) -> int | None:
    return response.usage.prompt_tokens if response.usage else None


class OpenAIEmbedder:
    """The ``Embedder`` over HTTP; one client per instance, closed by ``aclose``."""

    provider_name = "openai"

    def __init__(self, options: EmbedOptions, *, sleep: Sleep = asyncio.sleep) -> None:
        if options.dim < 1:
            raise ConfigurationError(f"the embedding dimension must be positive, got {options.dim}")
        self._options = options
        self._sleep = sleep
        send = options.send_dimensions
        self._send_dimensions = accepts_dimensions(options.model) if send is None else send
        self._client = openai.AsyncOpenAI(
            base_url=options.base_url,
            api_key=options.api_key,
            max_retries=0,  # ``retry`` does it
            timeout=options.timeout_s,
        )

    @property
    def model(self) -> str:
        return self._options.model

    @property
    def dim(self) -> int:
        return self._options.dim

    async def aclose(self) -> None:
        await self._client.close()

    async def _create(self, texts: list[str]) -> CreateEmbeddingResponse:
        return await self._client.embeddings.create(
            input=texts,
            model=self._options.model,
            dimensions=self._options.dim if self._send_dimensions else openai.omit,
            # Floats, not the library's default base64: local servers vary in support.
            encoding_format="float",
        )

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        if not texts:  # the API rejects an empty input list
            return Answer(empty(self._options.dim), Usage(), self._options.model)
        # An empty string is rejected too; a space embeds as "nothing said".
        safe = [text if text.strip() else " " for text in texts]
        response = await call_with_retry(
            lambda: self._create(safe), self._options.retry, what=_WHAT, sleep=self._sleep,
            tokens=estimate_tokens(sum(len(text) for text in safe)), used=used_tokens,
        )
        vectors = unit_vectors(response, len(texts), self._options.dim)
        usage = Usage(response.usage.prompt_tokens, 0) if response.usage else Usage()
        return Answer(vectors, usage, self._options.model)
