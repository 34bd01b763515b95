"""An offline embedder: signed feature hashing of words and character trigrams.

It needs no model and no network, so demos, tests and air-gapped trials can run
the whole pipeline. Vectors only capture surface overlap ("Uses Postgres" sits
near "Uses SQLite instead of Postgres"), which is what the consolidation step
needs to find a fact's likely neighbours; it knows nothing about synonyms.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from functools import lru_cache
from hashlib import blake2b

import numpy as np

from worker.providers.base import Answer, Usage
from worker.vectors import Vector

WORD_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.5

_WORD = re.compile(r"\w+")
# Hashed in place of features when a text has none, so blank input still gets
# a unit vector and every blank text gets the same one.
_EMPTY_FEATURE = "\x00empty"


def _features(text: str) -> Iterator[tuple[str, float]]:
    # The prefixes keep the word "the" and the trigram "the" in different buckets.
    for word in _WORD.findall(text.casefold()):
        yield "w:" + word, WORD_WEIGHT
        padded = f" {word} "
        for i in range(len(padded) - 2):
            yield "c:" + padded[i : i + 3], TRIGRAM_WEIGHT


@lru_cache(maxsize=1 << 16)
def _hash64(feature: str) -> int:
    # blake2b rather than hash(): str hashes are salted per process, and stored
    # vectors must stay comparable with vectors computed by any later worker.
    digest = blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _place(feature: str, dim: int) -> tuple[int, float]:
    # The low bit picks the sign so colliding features tend to cancel, not pile up.
    h = _hash64(feature)
    return (h >> 1) % dim, (1.0 if h & 1 else -1.0)


def _unit_buckets(text: str, dim: int) -> dict[int, float]:
    """The non-zero entries of ``text``'s unit-length hashed vector, by index."""
    if dim < 1:
        raise ValueError(f"dim must be at least 1, got {dim}")
    # Accumulate sparsely: a sentence touches a few dozen buckets out of ~1500.
    buckets: dict[int, float] = {}
    for feature, weight in _features(text):
        index, sign = _place(feature, dim)
        buckets[index] = buckets.get(index, 0.0) + sign * weight
    norm = math.sqrt(math.fsum(v * v for v in buckets.values()))
    if norm == 0.0:  # no tokens, or (at tiny dims) signs that cancelled out
        index, sign = _place(_EMPTY_FEATURE, dim)
        return {index: sign}
    return {index: value / norm for index, value in buckets.items()}


def hash_embed(text: str, dim: int) -> list[float]:
    """The unit-length hashed vector of ``text`` in ``dim`` dimensions."""
    vector = [0.0] * dim
    for index, value in _unit_buckets(text, dim).items():
        vector[index] = value
    return vector


def hash_embed_matrix(texts: list[str], dim: int) -> Vector:
    """``hash_embed`` of every text, as the float32 matrix the pipeline carries."""
    matrix = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        buckets = _unit_buckets(text, dim)
        matrix[row, list(buckets)] = list(buckets.values())
    return matrix


class HashingEmbedder:
    """The ``Embedder`` for offline runs; the same text gives the same vector anywhere."""

    __slots__ = ("_dim", "_model")
    provider_name = "memfleet.hashing"

    def __init__(self, dim: int, model: str = "hashing-v1") -> None:
        if dim < 1:
            raise ValueError(f"dim must be at least 1, got {dim}")
        self._dim = dim
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        return self._dim

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        return Answer(hash_embed_matrix(texts, self._dim), Usage(0, 0), self._model)
