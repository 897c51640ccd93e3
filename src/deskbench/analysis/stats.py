"""Confidence intervals for per-item scores: Wilson for proportions, percentile bootstrap for means.

Benchmarks have a few hundred items, so a score without an interval overstates what a ranking
shows. The bootstrap resamples item indices once and applies them to every metric column, so the
intervals of accuracy, Page F1, ... come from the same resampled benchmarks (paired).

Also the tests and effect sizes the consulting paper reports (§4.3-4.11): Cohen's d, exact
McNemar on paired ACCEPTs with Holm's adjustment, Pearson/Spearman with p-values (Bonferroni for
Table 14's family), and the deliverables diagnostics on graded rows (sole-cause attribution, VRS
weight sensitivity).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from deskbench.tracks.deliverables.scoring.vrs import GradedRow, Weighting

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


# --- deliverables diagnostics on graded rows (consulting paper §4.10-4.11) -------------------


def jaccard(a: set[Any], b: set[Any]) -> float:
    """|a & b| / |a | b|; 1.0 for two empty sets (identical, if vacuously)."""
    union = a | b
    return 1.0 if not union else len(a & b) / len(union)


_V_MIN = 80.0
_PASS = 2  # a rubric "passes" at >= 2 (Table 16); sole-cause failures are single scores below it


def _sole_cause_code(row: GradedRow) -> str | None:
    """The criterion a rejected response failed on alone (§4.10.2), else None."""
    from deskbench.tracks.deliverables.scoring.vrs import accept

    if row.v < _V_MIN - 1e-9 or accept(row.v, row.scores):
        return None
    low = [code for code, r in row.scores.items() if r < _PASS]
    return low[0] if len(low) == 1 else None


def sole_cause(rows: Iterable[GradedRow]) -> dict[str, int]:
    """Table 15: per criterion, the REJECTED responses (Eq. 3) with V >= 80 where that criterion
    alone scored below 2 (all others >= 2). Such a criterion is a threshold blocker on its own,
    which a correlation with ACCEPT averaged over all responses can hide. Every code is present,
    zeros included.

    §4.10.2 defines a sole-cause failure as a response "that would have ACCEPTed except that R
    alone scored below 2" and counts "sole-cause rejections": an accepted response is no failure,
    so one 1 with four 3s (rbar 2.6, V 90, accepted by Eq. 3) is not counted."""
    from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

    counts = dict.fromkeys(RUBRIC_CODES, 0)
    for row in rows:
        code = _sole_cause_code(row)
        if code is not None:
            counts[code] += 1
    return counts


@dataclass(frozen=True)
class SoleCauseSummary:
    """The counts §4.10.2 quotes: responses clearing V >= 80; of those, with all five criteria
    >= 2, and accepted among those; the sole-cause counts (Table 15) and their total; and the
    responses auto-rejected (a criterion at 0). None of those is rejected by the zero alone:
    a zero caps rbar at 12/5 = 2.4 < 2.5, so the paper's "zero unique cases" holds by arithmetic."""

    cleared_v: int
    all_at_least_2: int
    accepted_all_at_least_2: int
    sole_cause: dict[str, int]
    sole_cause_total: int
    auto_rejected: int
    one_below_2_accepted: int = 0  # V >= 80, exactly one criterion < 2, yet accepted: not a failure


def sole_cause_summary(rows: Iterable[GradedRow]) -> SoleCauseSummary:
    """`sole_cause` with the funnel counts around it (see `SoleCauseSummary`)."""
    from deskbench.tracks.deliverables.scoring.vrs import accept

    rows = list(rows)
    cleared = [r for r in rows if r.v >= _V_MIN - 1e-9]
    all_pass = [r for r in cleared if min(r.scores.values()) >= _PASS]
    zeroed = [r for r in rows if min(r.scores.values()) == 0]
    counts = sole_cause(rows)
    one_low = [r for r in cleared if sum(v < _PASS for v in r.scores.values()) == 1]
    return SoleCauseSummary(
        cleared_v=len(cleared),
        all_at_least_2=len(all_pass),
        accepted_all_at_least_2=sum(accept(r.v, r.scores) for r in all_pass),
        sole_cause=counts,
        sole_cause_total=sum(counts.values()),
        auto_rejected=len(zeroed),
        one_below_2_accepted=sum(accept(r.v, r.scores) for r in one_low),
    )


@dataclass(frozen=True)
class SensitivityRow:
    """One weighting of Table 18: mean VRS per system; the threshold T calibrated so "VRS >= T"
    accepts as many responses as the rule (Eq. 3) does; the accepts under it in total and per
    system; and the Jaccard similarity of that accept set to the rule's, by (system, task_id)."""

    weighting: str
    mean_vrs: dict[str, float]
    threshold: float
    accepts: int
    rule_accepts: int
    split: dict[str, int]
    jaccard: float


# VRS values closer than this count as tied at the threshold (the same score reached by
# different float operations).
_TIE = 1e-9


def weight_sensitivity(
    rows: Sequence[GradedRow],
    weightings: Sequence[Weighting] | None = None,
    *,
    strict: bool,
) -> list[SensitivityRow]:
    """Table 18 for each weighting (default: the paper's five, `PAPER_WEIGHTINGS`). Shows whether
    the headline ordering and the accept set depend on the 0.5/0.5 choice in Eq. 1.

    T is the k-th largest VRS, k = the number of rule-based ACCEPTs; ACCEPT' = VRS >= T, so
    responses tied at T are all accepted and the count can exceed k (the paper's option A, one
    extra). With no rule ACCEPT, T = inf and nothing is accepted. Systems appear in order of
    first occurrence. Note Table 18's means match the relaxed variant (strict=False), although
    its caption says strict. Raises ValueError on a repeated (system, task_id)."""
    from deskbench.tracks.deliverables.scoring.vrs import PAPER_WEIGHTINGS, accept, vrs_weighted

    chosen = PAPER_WEIGHTINGS if weightings is None else tuple(weightings)
    keys = [(r.system, r.task_id) for r in rows]
    if len(set(keys)) != len(keys):
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"repeated (system, task_id) rows: {dupes[:5]}")
    systems = list(dict.fromkeys(r.system for r in rows))
    rule = {key for key, r in zip(keys, rows, strict=True) if accept(r.v, r.scores)}
    k = len(rule)
    out: list[SensitivityRow] = []
    for w in chosen:
        scores = [vrs_weighted(r.v, r.scores, w, strict=strict) for r in rows]
        means = {
            s: float(np.mean([v for v, r in zip(scores, rows, strict=True) if r.system == s]))
            for s in systems
        }
        threshold = sorted(scores, reverse=True)[k - 1] if k else math.inf
        chosen_keys = {key for key, v in zip(keys, scores, strict=True) if v >= threshold - _TIE}
        split = {s: sum(1 for key in chosen_keys if key[0] == s) for s in systems}
        out.append(
            SensitivityRow(
                weighting=w.name,
                mean_vrs=means,
                threshold=float(threshold),
                accepts=len(chosen_keys),
                rule_accepts=k,
                split=split,
                jaccard=jaccard(chosen_keys, rule),
            )
        )
    return out
