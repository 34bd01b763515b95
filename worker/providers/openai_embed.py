"""Embeddings over an OpenAI-compatible ``POST /v1/embeddings`` endpoint.

All of a job's texts go in one call (a list ``input``). The answer is checked
before anyone stores it: one vector per text, each of the configured dimension
(a mismatch is a configuration error: the database column has that size) and
finite. Vectors are L2-normalised here because not every server does it and the
neighbour search assumes unit length.

Vectors are asked for as base64 of little-endian float32 (``encoding_format``),
which OpenAI and vLLM serve: a tenth of the bytes of a JSON list of floats, and
decoded by numpy rather than parsed number by number. A server that ignores
the parameter and sends lists of floats is read too. The body is read with
memfleet's own model, once: the client's response objects are not built
(docs/bench.md, the real path).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from worker.errors import ConfigurationError, ProviderAnswerInvalid
from worker.protection.budget import estimate_tokens
from worker.protection.retry import RetryPolicy, Sleep, call_with_retry
from worker.providers.base import Answer, Usage
from worker.providers.http_client import SharedClient, new_client
from worker.providers.llm_json import describe_errors
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


class _Item(BaseModel):
    index: int
    # base64 of little-endian float32 as asked, or a list from a server that ignores it.
    embedding: str | list[float]


class _Usage(BaseModel):
    prompt_tokens: int = 0


class EmbeddingsBody(BaseModel):
    """The part of an embeddings answer memfleet reads; anything else is ignored."""

    data: list[_Item]
    usage: _Usage | None = None


def parse_embeddings(body: bytes) -> EmbeddingsBody:
    try:
        return EmbeddingsBody.model_validate_json(body)
    except ValidationError as exc:
        # Not chained: the validation error would carry the whole body into the logs.
        raise ProviderAnswerInvalid("the embeddings endpoint's answer is not an embeddings"
                                    f" list: {describe_errors(exc)}") from None


def _floats(embedding: str | list[float]) -> np.ndarray:
    """One vector as float64, from base64 float32 or from a list of floats."""
    if isinstance(embedding, list):
        return np.asarray(embedding, dtype=np.float64)
    try:
        raw = base64.b64decode(embedding, validate=True)
    except (binascii.Error, ValueError):
        raise ProviderAnswerInvalid("the embeddings endpoint returned invalid base64") from None
    if len(raw) % 4:
        raise ProviderAnswerInvalid(
            f"the embeddings endpoint returned {len(raw)} bytes, not a whole number of float32")
    return np.frombuffer(raw, dtype="<f4").astype(np.float64)


def unit_vectors(body: EmbeddingsBody, count: int, dim: int) -> Vector:
    """The answer's vectors in input order, checked and scaled to unit length."""
    if len(body.data) != count:
        raise ProviderAnswerInvalid(
            f"the embeddings endpoint returned {len(body.data)} vectors for {count} texts"
        )
    ordered = sorted(body.data, key=lambda item: item.index)
    if [item.index for item in ordered] != list(range(count)):
        raise ProviderAnswerInvalid("the embeddings endpoint returned unexpected indexes")
    rows = [_floats(item.embedding) for item in ordered]
    for row in rows:
        if len(row) != dim:
            raise ConfigurationError(
                f"the embeddings model returned {len(row)} dimensions,"
                f" MEMFLEET_EMBED_DIM is {dim}: set the dimension the model produces"
            )
    # float64 for the norms, so a vector of tiny or huge values still scales right.
    matrix = np.stack(rows) if rows else np.empty((0, dim), dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise ProviderAnswerInvalid("the embeddings endpoint returned a zero or NaN vector")
    unit: Vector = (matrix / norms).astype(np.float32)
    return unit


def used_tokens(body: EmbeddingsBody) -> int | None:
    return body.usage.prompt_tokens if body.usage else None


class OpenAIEmbedder:
    """The ``Embedder`` over HTTP; its client as the chat providers' (http_client)."""

    provider_name = "openai"

    def __init__(self, options: EmbedOptions, *, sleep: Sleep = asyncio.sleep,
                 client: SharedClient | None = None) -> None:
        if options.dim < 1:
            raise ConfigurationError(f"the embedding dimension must be positive, got {options.dim}")
        self._options = options
        self._sleep = sleep
        send = options.send_dimensions
        self._send_dimensions = accepts_dimensions(options.model) if send is None else send
        self._shared = client or SharedClient(
            new_client(options.base_url, options.api_key, options.timeout_s))
        self._client = self._shared.take()
        self._closed = False

    @property
    def model(self) -> str:
        return self._options.model

    @property
    def dim(self) -> int:
        return self._options.dim

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._shared.release()

    async def _create(self, texts: list[str]) -> EmbeddingsBody:
        body: dict[str, Any] = {"input": texts, "model": self._options.model,
                                "encoding_format": "base64"}
        if self._send_dimensions:
            body["dimensions"] = self._options.dim
        # The client's documented raw request (as for chat): its HTTP, errors and timeouts.
        return parse_embeddings(await self._client.post(
            "/embeddings", body=body, cast_to=bytes, options={"timeout": self._options.timeout_s}))

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        if not texts:  # the API rejects an empty input list
            return Answer(empty(self._options.dim), Usage(), self._options.model)
        # An empty string is rejected too; a space embeds as "nothing said".
        safe = [text if text.strip() else " " for text in texts]
        body = await call_with_retry(
            lambda: self._create(safe), self._options.retry, what=_WHAT, sleep=self._sleep,
            tokens=estimate_tokens(sum(len(text) for text in safe)), used=used_tokens,
        )
        vectors = unit_vectors(body, len(texts), self._options.dim)
        usage = Usage(body.usage.prompt_tokens, 0) if body.usage else Usage()
        return Answer(vectors, usage, self._options.model)
