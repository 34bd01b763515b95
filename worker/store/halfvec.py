"""halfvec parameters in PostgreSQL's binary format, encoded a matrix at a time.

pgvector's own codec converts and byte-swaps one vector per call; a job sends
10 candidates to the neighbour query and several to the inserts, so the store
encodes the whole float32 matrix with one numpy conversion and hands asyncpg
the finished bytes (``EncodedHalfvec``), which ``encode`` passes through.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from pgvector import HalfVector

from worker.vectors import Vector


class EncodedHalfvec(bytes):
    """One halfvec already in the wire format: uint16 dim, uint16 0, dim big-endian halves."""


def encode_rows(matrix: Vector) -> list[EncodedHalfvec]:
    """Every row of ``matrix`` as a halfvec parameter."""
    if matrix.ndim != 2:
        raise ValueError(f"expected a matrix of rows, got {matrix.ndim} dimension(s)")
    header = struct.pack(">HH", matrix.shape[1], 0)
    halves = matrix.astype(">f2")
    return [EncodedHalfvec(header + row.tobytes()) for row in halves]


def encode(value: Any) -> bytes:
    """The asyncpg encoder for halfvec: pre-encoded rows as they are, anything else via pgvector."""
    if isinstance(value, EncodedHalfvec):
        return value
    return (value if isinstance(value, HalfVector) else HalfVector(value)).to_binary()


def encode_each(rows: Sequence[Vector]) -> list[EncodedHalfvec]:
    """``encode_rows`` for separate 1-D rows (one per write of a commit)."""
    return encode_rows(np.stack(rows)) if rows else []
