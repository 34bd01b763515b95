"""What the embeddings endpoint answers is checked and normalised before anyone stores it."""

from __future__ import annotations

import numpy as np
import pytest
from openai.types import CreateEmbeddingResponse

from worker.errors import ConfigurationError, ProviderAnswerInvalid
from worker.providers.openai_embed import unit_vectors


def _response(*vectors: tuple[int, list[float]]) -> CreateEmbeddingResponse:
    return CreateEmbeddingResponse.model_validate({
        "object": "list", "model": "m",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in vectors],
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    })


def test_rows_in_input_order_scaled_to_unit_length() -> None:
    matrix = unit_vectors(_response((1, [0.0, 2.0, 0.0]), (0, [3.0, 0.0, 4.0])), 2, 3)
    assert matrix.dtype == np.float32 and matrix.shape == (2, 3)
    np.testing.assert_allclose(matrix, [[0.6, 0.0, 0.8], [0.0, 1.0, 0.0]], atol=1e-7)


def test_tiny_values_still_scale() -> None:
    matrix = unit_vectors(_response((0, [1e-30, 1e-30])), 1, 2)
    np.testing.assert_allclose(matrix, [[2**-0.5, 2**-0.5]], atol=1e-7)


@pytest.mark.parametrize("vector", [[0.0, 0.0], [float("nan"), 1.0], [float("inf"), 1.0]])
def test_zero_or_non_finite_vectors_are_refused(vector: list[float]) -> None:
    with pytest.raises(ProviderAnswerInvalid, match="zero or NaN"):
        unit_vectors(_response((0, vector)), 1, 2)


def test_wrong_dimension_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="MEMFLEET_EMBED_DIM"):
        unit_vectors(_response((0, [1.0, 0.0, 0.0])), 1, 2)


def test_missing_or_repeated_indexes_are_refused() -> None:
    with pytest.raises(ProviderAnswerInvalid, match="unexpected indexes"):
        unit_vectors(_response((0, [1.0, 0.0]), (0, [0.0, 1.0])), 2, 2)
    with pytest.raises(ProviderAnswerInvalid, match="1 vectors for 2"):
        unit_vectors(_response((0, [1.0, 0.0])), 2, 2)
