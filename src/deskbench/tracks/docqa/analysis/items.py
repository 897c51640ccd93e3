"""Classical Test Theory per item (MADQA Appendix D): difficulty and corrected discrimination.

Input is a response matrix, systems x items, with accuracy in [0, 1] and NaN where an item was not
scored for a system (a failed judge call). Unscored cells are left out, never counted as wrong:
the run already scores missing answers as 0, so a NaN is a measurement we do not have.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from deskbench.analysis.stats import pearson

Matrix = npt.NDArray[np.float64]


def difficulty(matrix: Matrix) -> Matrix:
    """p_j: mean accuracy of the systems on item j, over the systems that were scored on it.

    Lower is harder. NaN for an item no system was scored on.
    """
    m = np.asarray(matrix, dtype=np.float64)
    scored = ~np.isnan(m)
    counts = scored.sum(axis=0)
    sums = np.where(scored, m, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def rest_scores(matrix: Matrix, j: int) -> Matrix:
    """S_-j per system: the total score over all items except j (the paper's corrected total).

    With unscored cells the total is the mean over the system's other scored items times the
    number of other items, so a system is not penalised for judge failures; with none unscored
    this is exactly the sum of the paper.
    """
    m = np.asarray(matrix, dtype=np.float64)
    others = np.delete(m, j, axis=1)
    scored = ~np.isnan(others)
    counts = scored.sum(axis=1)
    sums = np.where(scored, others, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1) * others.shape[1], np.nan)


def discrimination(matrix: Matrix) -> Matrix:
    """r_j: corrected point-biserial correlation Corr(X_.j, S_-j) (Appendix D), over the systems
    scored on item j. Subtracting the item from the total avoids correlating the item with itself.
    NaN when undefined: a constant item, a constant rest-score, or fewer than two systems."""
    m = np.asarray(matrix, dtype=np.float64)
    out = np.full(m.shape[1], np.nan)
    for j in range(m.shape[1]):
        rest = rest_scores(m, j)
        keep = ~np.isnan(m[:, j]) & ~np.isnan(rest)
        out[j] = pearson(m[keep, j], rest[keep])
    return out
