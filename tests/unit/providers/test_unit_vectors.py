"""What the embeddings endpoint answers is checked and normalised before anyone stores it."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from worker.errors import ConfigurationError, ProviderAnswerInvalid
from worker.providers.openai_embed import EmbeddingsBody, parse_embeddings, unit_vectors


def _b64(vector: list[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _response(*vectors: tuple[int, list[float] | str]) -> EmbeddingsBody:
    """The body as a server sends it, read the way the provider reads it."""
    return parse_embeddings(json.dumps({
        "object": "list", "model": "m",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in vectors],
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }).encode())


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


def test_base64_float32_is_decoded_like_a_list_of_floats() -> None:
    as_floats = unit_vectors(_response((1, [0.0, 2.0, 0.0]), (0, [3.0, 0.0, 4.0])), 2, 3)
    as_base64 = unit_vectors(_response((1, _b64([0.0, 2.0, 0.0])), (0, _b64([3.0, 0.0, 4.0]))),
                             2, 3)
    assert as_base64.dtype == np.float32
    np.testing.assert_array_equal(as_base64, as_floats)


def test_base64_and_lists_may_mix() -> None:
    # A proxy in front of two servers, or one that converts some answers: both are read.
    matrix = unit_vectors(_response((0, _b64([0.0, 1.0])), (1, [1.0, 0.0])), 2, 2)
    np.testing.assert_allclose(matrix, [[0.0, 1.0], [1.0, 0.0]], atol=1e-7)


def test_base64_of_a_wrong_length_is_invalid() -> None:
    # Six bytes: not a whole number of float32, so not a vector of any dimension.
    odd = base64.b64encode(b"\x00\x00\x80?\x00\x00").decode("ascii")
    with pytest.raises(ProviderAnswerInvalid, match="not a whole number of float32"):
        unit_vectors(_response((0, odd)), 1, 2)


def test_base64_of_another_dimension_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="returned 3 dimensions"):
        unit_vectors(_response((0, _b64([1.0, 0.0, 0.0]))), 1, 2)


def test_text_that_is_not_base64_is_invalid() -> None:
    with pytest.raises(ProviderAnswerInvalid, match="invalid base64"):
        unit_vectors(_response((0, "not base64!")), 1, 2)


@pytest.mark.parametrize("body", [b"not json", b"{}", b'{"data": [{"index": 0}]}',
                                  b'{"data": [{"index": 0, "embedding": {"x": 1}}]}'])
def test_a_body_that_is_not_an_embeddings_list_is_invalid(body: bytes) -> None:
    with pytest.raises(ProviderAnswerInvalid, match="not an embeddings list") as caught:
        parse_embeddings(body)
    assert caught.value.__cause__ is None  # a validation error would quote the body
