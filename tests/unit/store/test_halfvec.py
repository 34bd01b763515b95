"""Rows encoded a matrix at a time are byte for byte what pgvector's own codec sends."""

from __future__ import annotations

import numpy as np
import pytest
from pgvector import HalfVector

from worker.store.halfvec import EncodedHalfvec, encode, encode_each, encode_rows


def test_rows_match_pgvector_encoding() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((4, 1536)).astype(np.float32)
    encoded = encode_rows(matrix)
    assert [bytes(e) for e in encoded] == [HalfVector(row).to_binary() for row in matrix]
    assert all(isinstance(e, EncodedHalfvec) for e in encoded)


def test_encoder_passes_encoded_rows_and_converts_the_rest() -> None:
    row = np.array([0.5, -0.25, 1.0], dtype=np.float32)
    [pre] = encode_rows(row.reshape(1, 3))
    assert encode(pre) is pre
    assert encode(row) == encode([0.5, -0.25, 1.0]) == encode(HalfVector(row)) == pre


def test_plain_bytes_are_not_taken_for_encoded_rows() -> None:
    with pytest.raises(ValueError):
        encode(b"\x00\x03\x00\x00")


def test_each_and_empty() -> None:
    rows = [np.full(2, v, dtype=np.float32) for v in (1.0, 2.0)]
    assert encode_each(rows) == encode_rows(np.stack(rows))
    assert encode_each([]) == []
    with pytest.raises(ValueError, match="matrix of rows"):
        encode_rows(rows[0])
