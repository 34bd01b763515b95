"""Bootstrap 95% intervals of the suite's accuracy, by resampling scenarios.

A kind's accuracy is its assertions held over its assertions. Its interval: draw the
kind's scenarios with replacement as many times as it has scenarios, ``SAMPLES``
times, take that ratio each time, and keep the 2.5th and 97.5th percentiles. The
total resamples within each kind (stratified: every draw keeps each kind's number of
scenarios) and sums. The generator is seeded from ``SEED`` and the kind's name, so a
kind's interval does not depend on which other kinds ran, and a run repeats exactly.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np

SEED = 38
SAMPLES = 2000
LEVEL = 0.95


def _draws(held: Sequence[int], assertions: Sequence[int], kind: str,
           samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per draw, the resampled sums of held and of assertions."""
    rng = np.random.default_rng([seed, zlib.crc32(kind.encode())])
    pick = rng.integers(0, len(held), size=(samples, len(held)))
    return (np.asarray(held, dtype=np.int64)[pick].sum(axis=1),
            np.asarray(assertions, dtype=np.int64)[pick].sum(axis=1))


def _interval(held: np.ndarray, assertions: np.ndarray) -> tuple[float, float]:
    ratio = np.divide(held, assertions, out=np.zeros(len(held)), where=assertions > 0)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(ratio, [tail, 100 - tail])
    return float(low), float(high)


def intervals(by_kind: Mapping[str, Sequence[tuple[int, int]]], *, samples: int = SAMPLES,
              seed: int = SEED) -> tuple[dict[str, tuple[float, float]], tuple[float, float]]:
    """``by_kind``: per kind, each scenario's (held, assertions). The interval of each
    kind's accuracy, and the total's (stratified by kind)."""
    per_kind: dict[str, tuple[float, float]] = {}
    total_held = np.zeros(samples, dtype=np.int64)
    total_assertions = np.zeros(samples, dtype=np.int64)
    for kind, scenarios in by_kind.items():
        if not scenarios:
            continue
        held, assertions = _draws([h for h, _ in scenarios], [a for _, a in scenarios],
                                  kind, samples, seed)
        per_kind[kind] = _interval(held, assertions)
        total_held += held
        total_assertions += assertions
    total = _interval(total_held, total_assertions) if per_kind else (0.0, 0.0)
    return per_kind, total
