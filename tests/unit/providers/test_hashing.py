"""The offline hashing embedder: stable, unit length, and similar for similar facts."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.providers.base import Embedder, Usage
from worker.providers.hashing import HashingEmbedder, hash_embed


def _cos(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def _norm(v: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in v))


async def test_embed_shape_usage_and_model() -> None:
    embedder = HashingEmbedder(dim=64)
    texts = ["Uses Postgres", "Lives in Berlin", ""]
    answer = await embedder.embed(texts)
    assert embedder.dim == 64
    assert embedder.model == "hashing-v1"
    assert answer.model == "hashing-v1"
    assert answer.usage == Usage(0, 0)
    # One float32 matrix, a row per text, each row the text's hash_embed vector.
    assert answer.value.dtype == np.float32
    assert answer.value.shape == (3, 64)
    for row, text in zip(answer.value, texts, strict=True):
        np.testing.assert_allclose(row, hash_embed(text, 64), rtol=0, atol=1e-7)


async def test_custom_model_name_and_empty_batch() -> None:
    embedder = HashingEmbedder(dim=8, model="hashing-test")
    answer = await embedder.embed([])
    assert answer.value.shape == (0, 8)
    assert answer.model == "hashing-test"


def test_satisfies_the_embedder_protocol() -> None:
    embedder: Embedder = HashingEmbedder(dim=16)
    assert embedder.dim == 16


@pytest.mark.parametrize("dim", [0, -3])
def test_rejects_a_dimension_below_one(dim: int) -> None:
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(dim=dim)
    with pytest.raises(ValueError, match="dim"):
        hash_embed("x", dim)


def test_same_text_same_vector() -> None:
    assert hash_embed("Works at Acme", 256) == hash_embed("Works at Acme", 256)


def test_stable_across_processes() -> None:
    # Python salts str hashes per process; stored vectors must not depend on that.
    code = (
        "from worker.providers.hashing import hash_embed;"
        "print(repr(hash_embed('Uses SQLite instead of Postgres', 32)))"
    )
    root = str(Path(__file__).resolve().parents[3])
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            cwd=root, env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert outputs.pop().strip() == repr(hash_embed("Uses SQLite instead of Postgres", 32))


def test_case_and_punctuation_do_not_matter() -> None:
    assert hash_embed("USES  postgres!", 128) == hash_embed("uses Postgres", 128)


@pytest.mark.parametrize("text", ["", "   ", "?!…", "\n\t"])
def test_tokenless_text_gets_one_fixed_unit_vector(text: str) -> None:
    vector = hash_embed(text, 48)
    assert _norm(vector) == pytest.approx(1.0)
    assert vector == hash_embed("", 48)
    assert sum(1 for x in vector if x != 0.0) == 1


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), dim=st.integers(min_value=1, max_value=300))
def test_always_unit_length(text: str, dim: int) -> None:
    vector = hash_embed(text, dim)
    assert len(vector) == dim
    assert _norm(vector) == pytest.approx(1.0, abs=1e-9)


def test_related_facts_are_closer_than_unrelated_ones() -> None:
    dim = 1536
    uses_pg = hash_embed("Uses Postgres", dim)
    switched = hash_embed("Uses SQLite instead of Postgres", dim)
    unrelated = [hash_embed(t, dim) for t in (
        "Lives in Berlin", "Is allergic to peanuts", "Wife's name is Anna", "Prefers tea",
    )]
    related = _cos(uses_pg, switched)
    assert related > 0.4
    for other in unrelated:
        assert related > _cos(uses_pg, other) + 0.25


def test_a_changed_slot_stays_near_its_old_value() -> None:
    dim = 1536
    berlin = hash_embed("Lives in Berlin", dim)
    assert _cos(berlin, hash_embed("Lives in Paris", dim)) > _cos(
        berlin, hash_embed("Uses Postgres", dim)
    )


def test_trigrams_match_inflections() -> None:
    dim = 1536
    hiking = hash_embed("hiking", dim)
    assert _cos(hiking, hash_embed("hikes", dim)) > _cos(hiking, hash_embed("sailing", dim))


def test_unicode_and_long_input() -> None:
    for text in ("我住在北京", "Ich wohne in München", "emoji 🚀🚀", "x" * 100_000):
        assert _norm(hash_embed(text, 256)) == pytest.approx(1.0)
    assert _cos(hash_embed("München", 256), hash_embed("münchen", 256)) == pytest.approx(1.0)
