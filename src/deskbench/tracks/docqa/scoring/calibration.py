"""Effort calibration: the Kuiper range of the cumulative-difference curve (MADQA §3.3, F.3).

Items are sorted by effort (e.g. tool calls) and D_k accumulates (correctness - mean correctness).
An agent whose accuracy does not depend on effort keeps D near 0; one that is right on cheap items
and wrong on expensive ones climbs, then falls. K = max D - min D, in units of items (the paper's
convention, not divided by N).

Ties in effort are common (step counts are small integers). The paper sorts with a permutation and
reads D at every k, so the order *within* a tie - i.e. the input order - changes K. By default
("robust") equal-effort items form one block and D is read only at block boundaries, which makes K
a function of the (effort, correct) pairs alone; "stable" reproduces the official script.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Efforts = Sequence[float | None] | npt.NDArray[Any]
Scores = Sequence[float] | npt.NDArray[Any]


@dataclass(frozen=True)
class KuiperResult:
    """K (NaN with a one-line `reason` when undefined) and the curve it was read from.

    `curve` holds D_0 = 0 followed by D at each point the statistic reads, and `effort` the effort
    at each of those points (the block's effort; the smallest effort for D_0). Both are empty when
    `value` is NaN. `ranks` holds k (how many items lie at or below each point: 0 for D_0), so
    the curve can be drawn against the share of items, as in MADQA Figures 6 and 10."""

    value: float
    reason: str | None
    effort: tuple[float, ...]
    curve: tuple[float, ...]
    ranks: tuple[int, ...] = ()


def _undefined(reason: str) -> KuiperResult:
    return KuiperResult(math.nan, reason, (), ())


def _arrays(effort: Efforts, correct: Scores) -> tuple[np.ndarray, np.ndarray]:
    """Float arrays of equal length; a missing effort (None) becomes NaN."""
    s = np.asarray(effort, dtype=float).reshape(-1)
    y = np.asarray(correct, dtype=float).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"effort has {s.size} values but correct has {y.size}")
    if np.isnan(y).any():
        raise ValueError(
            f"correct is NaN for {int(np.isnan(y).sum())} items: drop unscored items first"
        )
    return s, y


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def kuiper(
    effort: Efforts, correct: Scores, ties: Literal["robust", "stable"] = "robust"
) -> KuiperResult:
    """Kuiper range of the cumulative difference between correctness and its mean, over items
    sorted by effort. `correct` is used as given: callers pass binary correctness (score >= 0.5),
    as MADQA F.3 and the official code define y_i; partial credit would be a different quantity.

    Undefined (NaN) with no items, with any effort missing (the sort would be meaningless), or
    when accuracy is 0 or 1 (every deviation is 0: the curve says nothing about effort)."""
    if ties not in ("robust", "stable"):
        raise ValueError(f"ties must be 'robust' or 'stable', not {ties!r}")
    s, y = _arrays(effort, correct)
    n = y.size
    if n == 0:
        return _undefined("no items")
    missing = int(np.isnan(s).sum())
    if missing:
        return _undefined(f"no effort reported for {_items(missing)}")
    ybar = float(y.mean())
    if ybar in (0.0, 1.0):
        return _undefined(f"accuracy is {ybar:g}: the curve is flat")
    order = np.argsort(s, kind="stable")
    s_sorted = s[order]
    running = np.cumsum(y[order])
    if ties == "stable":
        ends = np.arange(n)
    else:  # the last item of each run of equal effort
        ends = np.flatnonzero(np.append(s_sorted[1:] != s_sorted[:-1], True))
    # D_k = (sum of the first k correctness values) - k * ybar: no drift from adding ybar n times.
    curve = np.concatenate(([0.0], running[ends] - (ends + 1) * ybar))
    points = np.concatenate((s_sorted[:1], s_sorted[ends]))
    ranks = np.concatenate(([0], ends + 1))
    return KuiperResult(
        float(curve.max() - curve.min()), None, tuple(points.tolist()), tuple(curve.tolist()),
        tuple(int(k) for k in ranks),
    )


@dataclass(frozen=True)
class WastedEffort:
    """MADQA's Wasted Effort Ratio (official eval/metrics.py `wasted_effort_ratio`): mean effort of
    the incorrect items over mean effort of the correct ones, each over items with effort > 0.
    rho > 1: the agent grinds on what it cannot solve; rho < 1: it fails fast. `ratio` is inf
    when no correct item has effort (as there), NaN when no item has any."""

    ratio: float
    mean_correct: float
    mean_incorrect: float
    n_correct: int
    n_incorrect: int


def wasted_effort_ratio(effort: Efforts, correct: Scores) -> WastedEffort:
    """See `WastedEffort`; correct means a score of at least 0.5; a missing effort (NaN) is left out."""
    s, y = _arrays(effort, correct)
    with np.errstate(invalid="ignore"):
        has_effort = s > 0
    right = y >= 0.5
    on_right, on_wrong = s[has_effort & right], s[has_effort & ~right]
    mean_right = float(on_right.mean()) if on_right.size else 0.0
    mean_wrong = float(on_wrong.mean()) if on_wrong.size else 0.0
    if not on_right.size and not on_wrong.size:
        ratio = math.nan
    else:
        ratio = mean_wrong / mean_right if mean_right > 0 else math.inf
    return WastedEffort(ratio, mean_right, mean_wrong, int(on_right.size), int(on_wrong.size))


def effort_share_incorrect(effort: Efforts, correct: Scores) -> float:
    """Share of the total effort spent on items that were not correct (correct < 0.5): how much
    of the budget bought nothing. deskbench's own measure, not the paper's Wasted Effort Ratio.
    NaN when there is no effort to share or any effort is missing."""
    s, y = _arrays(effort, correct)
    if s.size == 0 or np.isnan(s).any():
        return math.nan
    total = float(s.sum())
    if total == 0:
        return math.nan
    return float(s[y < 0.5].sum()) / total
