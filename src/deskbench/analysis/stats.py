"""Confidence intervals for per-item scores: Wilson for proportions, percentile bootstrap for means.

Benchmarks have a few hundred items, so a score without an interval overstates what a ranking
shows. The bootstrap resamples item indices once and applies them to every metric column, so the
intervals of accuracy, Page F1, ... come from the same resampled benchmarks (paired).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

# Cap on resampled indices held in memory at once (rows x items): 4M int64 = 32 MB.
_CHUNK_CELLS = 4_000_000


def wilson_interval(successes: float, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a proportion: unlike the Wald interval it stays inside [0, 1] and
    keeps its coverage near 0 and 1. `successes` may be fractional (a sum of partial credit)."""
    if n <= 0:
        return (math.nan, math.nan)
    z = float(NormalDist().inv_cdf(1 - alpha / 2))
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, center - half), min(1.0, center + half))


def _resampled_means(
    matrix: npt.NDArray[np.float64], resamples: int, seed: int
) -> npt.NDArray[np.float64]:
    """Means of each row of `matrix` (metrics x items) over `resamples` bootstrap samples of the
    item indices; the same indices for every row. Shape: metrics x resamples."""
    n = matrix.shape[1]
    rng = np.random.default_rng(seed)
    distinct, counts = np.unique(matrix.T, axis=0, return_counts=True)
    if len(counts) * 8 <= n:
        # Per-item scores take few distinct values (F1 is 0, 1/2, 2/3, 1, ...). Resampling n items
        # with replacement is then exactly drawing multinomial counts over the distinct rows:
        # the same bootstrap distribution, at a cost that does not grow with n.
        draws = rng.multinomial(n, counts / n, size=resamples)
        return np.asarray((draws @ distinct).T / n, dtype=np.float64)
    means = np.empty((matrix.shape[0], resamples))
    chunk = max(1, _CHUNK_CELLS // n)
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        for k, values in enumerate(matrix):
            means[k, start : start + rows] = values[idx].mean(axis=1)
    return means


def bootstrap_means_ci(
    columns: Mapping[str, npt.NDArray[Any] | Sequence[float]],
    *,
    resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals of the mean of several per-item columns, from one shared
    index matrix (paired resampling). Deterministic for a seed. Columns must be equally long;
    with no items every interval is (nan, nan), with one item it is (v, v)."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    arrays = {name: np.asarray(v, dtype=float).reshape(-1) for name, v in columns.items()}
    lengths = {a.size for a in arrays.values()}
    if len(lengths) > 1:
        sizes = ", ".join(f"{name}={a.size}" for name, a in arrays.items())
        raise ValueError(f"bootstrap columns differ in length ({sizes})")
    n = lengths.pop() if lengths else 0
    if n == 0:
        return {name: (math.nan, math.nan) for name in arrays}
    if n == 1:
        return {name: (float(a[0]), float(a[0])) for name, a in arrays.items()}
    means = _resampled_means(np.stack(list(arrays.values())), resamples, seed)
    bounds = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=1)
    return {name: (float(bounds[0, k]), float(bounds[1, k])) for k, name in enumerate(arrays)}


def bootstrap_mean_ci(
    values: npt.NDArray[Any] | Sequence[float],
    *,
    resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean (no distributional assumption: per-item scores
    are 0/0.5/1 or F1 values, far from normal). Same numbers as one column of
    `bootstrap_means_ci` with the same seed."""
    return bootstrap_means_ci({"values": values}, resamples=resamples, alpha=alpha, seed=seed)[
        "values"
    ]


def pearson(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Pearson correlation; NaN when either side is constant (or fewer than 2 points), where a
    correlation is undefined rather than zero."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 2:
        return math.nan
    dx, dy = x - x.mean(), y - y.mean()
    sxx, syy = float((dx * dx).sum()), float((dy * dy).sum())
    # Relative tolerance: sums of 0.5s can leave 1e-17 residue that is not real variance.
    if sxx <= 1e-12 * max(1.0, float((x * x).sum())) or syy <= 1e-12 * max(1.0, float((y * y).sum())):
        return math.nan
    return float((dx * dy).sum() / math.sqrt(sxx * syy))
