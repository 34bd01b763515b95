"""Embeddings as the pipeline carries them: one float32 matrix, a row per text.

A job's embeddings stay in this one array from the provider to the database
(similarity, the neighbour query, the inserts): converting 1536-float Python
lists back and forth cost more than the neighbour query itself.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]  # shape (rows, dim); a single vector is one row


def empty(dim: int) -> Vector:
    return np.zeros((0, dim), dtype=np.float32)
