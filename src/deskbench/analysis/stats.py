"""Confidence intervals for per-item scores: Wilson for proportions, percentile bootstrap for means.

Benchmarks have a few hundred items, so a score without an interval overstates what a ranking
shows. The bootstrap resamples item indices once and applies them to every metric column, so the
intervals of accuracy, Page F1, ... come from the same resampled benchmarks (paired).

Also the tests and effect sizes the consulting paper reports (§4.3-4.11): Cohen's d, exact
McNemar on paired ACCEPTs with Holm's adjustment, Pearson/Spearman with p-values (Bonferroni for
Table 14's family), Jaccard similarity. The deliverables diagnostics on graded rows (sole-cause
attribution, VRS weight sensitivity) are deliverables' (tracks/deliverables/scoring/vrs_diagnostics.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any, Literal

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


def cohens_d(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cohen's d = (mean a - mean b) / pooled SD, the pooled variance weighting each sample's
    (n - 1)-denominator variance by its degrees of freedom. Positive favours `a`. A gap in units
    of spread says whether a per-type difference (Table 8) is large relative to noise, which a raw
    gap on small arms cannot. NaN when undefined: an empty side, fewer than 2 values in all, or
    zero pooled spread."""
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    dof = x.size + y.size - 2
    if x.size == 0 or y.size == 0 or dof <= 0:
        return math.nan
    ss = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
    sd = math.sqrt(ss / dof)
    if not sd > 0:
        return math.nan
    return float((x.mean() - y.mean()) / sd)


@dataclass(frozen=True)
class McNemar:
    """Paired binary outcomes of two systems on the same items: counts of items both passed,
    only a, only b, neither, and the exact two-sided p-value on the discordant pairs."""

    both: int
    a_only: int
    b_only: int
    neither: int
    p: float


def _flag(x: object) -> bool:
    if x not in (0, 1):  # True/False, 0/1, numpy bools
        raise ValueError(f"paired outcomes must be booleans (or 0/1), not {x!r}")
    return bool(x)


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """Exact McNemar test (Table 17): under H0 each discordant item is a's or b's with probability
    1/2, so p = min(1, 2 P[X <= min(a_only, b_only)]) with X ~ Bin(a_only + b_only, 1/2); p = 1
    without discordant items. Exact (integer binomial sums) because the discordant counts are
    tiny (4 vs 9), where the chi-square approximation is poor."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes differ in length ({len(a)} vs {len(b)})")
    pairs = [(_flag(x), _flag(y)) for x, y in zip(a, b, strict=True)]
    both = sum(x and y for x, y in pairs)
    a_only = sum(x and not y for x, y in pairs)
    b_only = sum(y and not x for x, y in pairs)
    neither = len(pairs) - both - a_only - b_only
    n = a_only + b_only
    if n == 0:
        p = 1.0
    else:
        tail = Fraction(sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1)), 2**n)
        p = float(min(Fraction(1), 2 * tail))
    return McNemar(both=both, a_only=a_only, b_only=b_only, neither=neither, p=p)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order: the i-th smallest p (1-based) is
    multiplied by m - i + 1, made non-decreasing along the sorted order and capped at 1. Controls
    the family-wise error over several pairwise tests (three agent pairs) and is uniformly more
    powerful than Bonferroni."""
    values = [float(p) for p in pvalues]
    for p in values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must lie in [0, 1], not {p!r}")
    m = len(values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, idx in enumerate(sorted(range(m), key=values.__getitem__)):
        running = max(running, min(1.0, (m - rank) * values[idx]))
        adjusted[idx] = running
    return adjusted


def bonferroni(pvalues: Sequence[float | None], family: int | None = None) -> list[float | None]:
    """Bonferroni-adjusted p-values, in the input order: min(1, m p), m the size of the test
    family (default: every test given, undefined ones included, so a test that could not be
    computed does not shrink the family). An undefined p (None or NaN) stays None. The paper
    corrects Table 14's six Spearman tests this way ("after Bonferroni correction for six tests")."""
    m = len(pvalues) if family is None else family
    if m < len(pvalues):
        raise ValueError(f"a family of {m} tests cannot hold {len(pvalues)} p-values")
    out: list[float | None] = []
    for p in pvalues:
        if p is None or math.isnan(p):
            out.append(None)
            continue
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must lie in [0, 1], not {p!r}")
        out.append(min(1.0, m * float(p)))
    return out


@dataclass(frozen=True)
class Correlation:
    """A correlation coefficient (Pearson r or Spearman rho), its two-sided p-value and n."""

    rho: float
    p: float
    n: int


def correlation_pvalue(rho: float, n: int) -> float:
    """Two-sided p-value of a Pearson r or Spearman rho over n pairs: t = rho sqrt((n-2)/(1-rho^2))
    against Student t with n - 2 degrees of freedom (as scipy's pearsonr and spearmanr do; exact
    for Pearson under normality, the usual approximation for Spearman). NaN when rho is NaN or
    n < 3; 0 when |rho| = 1."""
    if math.isnan(rho) or n < 3:
        return math.nan
    if abs(rho) >= 1.0:
        return 0.0
    from scipy.special import stdtr  # scipy.special only, not scipy.stats: it loads fast

    t = abs(rho) * math.sqrt((n - 2) / ((1.0 - rho) * (1.0 + rho)))
    return float(min(1.0, 2.0 * stdtr(n - 2, -t)))


def _paired(
    x: npt.ArrayLike, y: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    xa = np.asarray(x, dtype=np.float64).reshape(-1)
    ya = np.asarray(y, dtype=np.float64).reshape(-1)
    if xa.size != ya.size:
        raise ValueError(f"correlated columns differ in length ({xa.size} vs {ya.size})")
    return xa, ya


def pearson_test(x: npt.ArrayLike, y: npt.ArrayLike) -> Correlation:
    """`pearson` with its t-test p-value. NaN coefficient and p for a constant column, fewer than
    two points or non-finite values."""
    xa, ya = _paired(x, y)
    if not (np.isfinite(xa).all() and np.isfinite(ya).all()):
        return Correlation(math.nan, math.nan, int(xa.size))
    r = pearson(xa, ya)
    return Correlation(r, correlation_pvalue(r, int(xa.size)), int(xa.size))


def average_ranks(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Ranks 1..n with tied values sharing the mean of their ranks (scipy's rankdata 'average')."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # rank of the last member of each tie group
    mean_rank = ends - (counts - 1) / 2.0
    return np.asarray(mean_rank[inverse], dtype=np.float64)


def spearman(x: npt.ArrayLike, y: npt.ArrayLike) -> Correlation:
    """Spearman rho (Pearson on average ranks, so ties are handled as scipy's spearmanr) with the
    t-approximation p-value. The paper prefers it to Pearson for 0-3 ordinal rubric scores, whose
    steps are not interval-spaced (§4.10). NaN for constant input, fewer than two points or
    non-finite values."""
    xa, ya = _paired(x, y)
    if not (np.isfinite(xa).all() and np.isfinite(ya).all()):
        return Correlation(math.nan, math.nan, int(xa.size))
    rho = pearson(average_ranks(xa), average_ranks(ya))
    return Correlation(rho, correlation_pvalue(rho, int(xa.size)), int(xa.size))


def correlation_matrix(
    columns: Mapping[str, Sequence[float] | npt.NDArray[Any]],
    method: Literal["pearson", "spearman"] = "pearson",
) -> dict[str, dict[str, float]]:
    """All pairwise correlations of equally long columns (Table 13: criteria x criteria), as
    matrix[a][b]. The diagonal is 1.0, or NaN for a constant column."""
    if method not in ("pearson", "spearman"):
        raise ValueError(f"method must be 'pearson' or 'spearman', not {method!r}")
    test = pearson_test if method == "pearson" else spearman
    arrays = {name: np.asarray(v, dtype=np.float64).reshape(-1) for name, v in columns.items()}
    if len({a.size for a in arrays.values()}) > 1:
        sizes = ", ".join(f"{name}={a.size}" for name, a in arrays.items())
        raise ValueError(f"correlation columns differ in length ({sizes})")
    names = list(arrays)
    out: dict[str, dict[str, float]] = {name: {} for name in names}
    for i, a in enumerate(names):
        for b in names[i:]:
            rho = test(arrays[a], arrays[b]).rho
            if a == b and not math.isnan(rho):
                rho = 1.0
            out[a][b] = out[b][a] = rho
    return out


def jaccard(a: set[Any], b: set[Any]) -> float:
    """|a & b| / |a | b|; 1.0 for two empty sets (identical, if vacuously)."""
    union = a | b
    return 1.0 if not union else len(a & b) / len(union)
