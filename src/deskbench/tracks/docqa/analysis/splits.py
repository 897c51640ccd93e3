"""Test/dev/train splits by Classical Test Theory (MADQA §2.4 and Appendix D).

The paper's rules, followed as written:
- Sentinel Pool: items with p <= 0.1 (solved by at most 10% of systems); 20% of the test set is
  reserved for them, whatever their discrimination, to keep headroom.
- The rest of the budget comes from items with p > 0.1, stratified into 9 uniform difficulty bins
  (0.1 < p <= 0.2, ..., 0.9 < p <= 1.0); within a bin, items are taken greedily by highest
  discrimination.

Where the paper is silent we decided, and the choice is a parameter or written here:
- the bin budget is split in proportion to how many candidates each bin holds (largest remainder),
  so the test set keeps the full set's difficulty profile outside the sentinel pool;
- sentinel items are taken hardest first (lowest p);
- dev is built by the same procedure from what test left; train is the remainder;
- if the sentinel pool is short, bins fill the gap (and vice versa), so the sizes asked for are met;
- ties (equal discrimination, equal p, NaN discrimination last) are broken by one permutation drawn
  from the seed, so the same seed gives the same splits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from deskbench.errors import UserError

SENTINEL_P = 0.1
N_BINS = 9
SENTINEL_FRACTION = 0.2
# Bin upper edges 0.2 .. 1.0; p is rounded before binning so 0.30000000000000004 falls in (0.2, 0.3].
_EDGES = np.round(np.linspace(SENTINEL_P, 1.0, N_BINS + 1), 10)
_DIGITS = 10

Vector = npt.NDArray[np.float64]


def is_sentinel(p: float) -> bool:
    """An item solved by at most 10% of systems (Appendix D)."""
    return not math.isnan(p) and round(p, _DIGITS) <= SENTINEL_P


def difficulty_bin(p: float) -> int | None:
    """Index 0..8 of the uniform difficulty bin of an item with p > 0.1; None for sentinel or
    unscored items, which are not binned."""
    if math.isnan(p) or is_sentinel(p):
        return None
    idx = int(np.searchsorted(_EDGES, round(p, _DIGITS), side="left")) - 1
    return min(max(idx, 0), N_BINS - 1)


@dataclass(frozen=True)
class Splits:
    """Item indices (columns of the response matrix) of each split, in selection order."""

    test: list[int]
    dev: list[int]
    train: list[int]
    sentinel_pool: list[int]


def _largest_remainder(counts: Sequence[int], total: int) -> list[int]:
    """Integer quotas proportional to `counts` summing to `total` (<= sum(counts)); each quota is
    at most its count. Remainder ties go to the lower bin, deterministically."""
    n = sum(counts)
    if n == 0 or total == 0:
        return [0] * len(counts)
    exact = [c * total / n for c in counts]
    quotas = [math.floor(e) for e in exact]
    order = sorted(range(len(counts)), key=lambda b: (-(exact[b] - quotas[b]), b))
    for b in order[: total - sum(quotas)]:
        quotas[b] += 1
    return quotas


def _select(
    candidates: Sequence[int], n: int, p: Vector, r: Vector, tie: npt.NDArray[np.int64],
    sentinel_fraction: float,
) -> list[int]:
    """Pick n items from candidates: the sentinel quota first, then bins by discrimination."""
    sentinels = sorted((i for i in candidates if is_sentinel(p[i])), key=lambda i: (p[i], tie[i]))
    binned: list[list[int]] = [[] for _ in range(N_BINS)]
    for i in candidates:
        b = difficulty_bin(p[i])
        if b is not None:
            binned[b].append(i)
    n_binned = sum(len(b) for b in binned)
    n_sent = min(len(sentinels), math.floor(sentinel_fraction * n + 0.5))  # half up, not banker's
    n_sent = max(n_sent, n - n_binned)  # too few binned items: more sentinels fill the gap
    chosen = sentinels[:n_sent]
    quotas = _largest_remainder([len(b) for b in binned], n - n_sent)
    for items, quota in zip(binned, quotas, strict=True):
        # Highest discrimination first; NaN (undefined) after every defined value.
        ranked = sorted(items, key=lambda i: (math.isnan(r[i]), -r[i] if not math.isnan(r[i]) else 0.0, tie[i]))
        chosen.extend(ranked[:quota])
    return chosen


def build_splits(
    p: Vector, r: Vector, n_test: int, n_dev: int, *, seed: int = 0, n_train: int | None = None,
    sentinel_fraction: float = SENTINEL_FRACTION,
) -> Splits:
    """Non-overlapping test, dev and train splits over items with difficulty `p` and
    discrimination `r` (one entry per item). Items never scored (NaN p) can only go to train.
    Train is every item left, or the first `n_train` of them in the seed's order."""
    p = np.asarray(p, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    if p.shape != r.shape:
        raise ValueError("difficulty and discrimination must have one entry per item")
    for name, size in (("--test", n_test), ("--dev", n_dev), ("--train", n_train)):
        if size is not None and size < 0:
            raise UserError(f"{name} {size} is not valid; use 0 or more")
    if not 0.0 <= sentinel_fraction <= 1.0:
        raise UserError(f"sentinel fraction {sentinel_fraction} is not valid; use a value in [0, 1]")
    scored = [i for i in range(p.size) if not math.isnan(p[i])]
    if n_test + n_dev > len(scored):
        raise UserError(f"--test {n_test} plus --dev {n_dev} exceeds the {len(scored)} scored items; ask for fewer")
    tie = np.random.default_rng(seed).permutation(p.size).astype(np.int64)
    test = _select(scored, n_test, p, r, tie, sentinel_fraction)
    taken = set(test)
    dev = _select([i for i in scored if i not in taken], n_dev, p, r, tie, sentinel_fraction)
    taken |= set(dev)
    rest = sorted((i for i in range(p.size) if i not in taken), key=lambda i: tie[i])
    if n_train is not None:
        if n_train > len(rest):
            raise UserError(f"--train {n_train} exceeds the {len(rest)} items left after test and dev; ask for fewer")
        rest = rest[:n_train]
    return Splits(test=test, dev=dev, train=sorted(rest),
                  sentinel_pool=[i for i in range(p.size) if is_sentinel(p[i])])


def system_means(matrix: npt.NDArray[np.float64], columns: Sequence[int] | None = None) -> Vector:
    """Mean accuracy per system over the given items (all when None), ignoring unscored cells."""
    m = np.asarray(matrix, dtype=np.float64)
    if columns is not None:
        m = m[:, list(columns)]
    scored = ~np.isnan(m)
    counts = scored.sum(axis=1)
    sums = np.where(scored, m, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def ranking_agreement(matrix: npt.NDArray[np.float64], columns: Sequence[int]) -> float:
    """Spearman's rho between system rankings by mean accuracy on `columns` and on all items: the
    paper's check that a test subset ranks systems as the whole benchmark does. NaN when undefined
    (fewer than two systems, or a constant ranking)."""
    sub, full = system_means(matrix, columns), system_means(matrix)
    keep = ~np.isnan(sub) & ~np.isnan(full)
    if keep.sum() < 2 or np.ptp(sub[keep]) == 0 or np.ptp(full[keep]) == 0:
        return math.nan
    from scipy.stats import spearmanr  # scipy.stats costs ~0.3 s: only when a ranking is compared

    return float(spearmanr(sub[keep], full[keep]).statistic)
