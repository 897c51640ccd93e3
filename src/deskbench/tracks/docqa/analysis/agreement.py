"""Pairwise Cohen's kappa between systems on binarised correctness.

Two systems with the same accuracy can fail on entirely different items; kappa says how far their
right/wrong patterns agree beyond what their accuracies alone would produce by chance.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

CORRECT_AT = 0.5  # accuracy >= 0.5 is correct: the ANLS* threshold and a judge's "partial" alike


def cohen_kappa(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cohen's kappa of two binary label vectors: (p_o - p_e) / (1 - p_e).

    NaN when chance agreement is already perfect (p_e = 1, both raters constant and equal) or when
    there are no items: kappa is undefined there, not 1.
    """
    x = np.asarray(a, dtype=bool)
    y = np.asarray(b, dtype=bool)
    n = x.size
    if n == 0:
        return math.nan
    p_o = float((x == y).mean())
    pa, pb = float(x.mean()), float(y.mean())
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if p_e >= 1.0 - 1e-12:
        return math.nan
    return (p_o - p_e) / (1 - p_e)


def kappa_matrix(matrix: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Kappa for every pair of systems (rows of `matrix`, systems x items, NaN = unscored), over
    the items both were scored on; also the number of such items per pair. Symmetric."""
    m = np.asarray(matrix, dtype=np.float64)
    k = m.shape[0]
    kappas = np.full((k, k), np.nan)
    counts = np.zeros((k, k), dtype=np.int64)
    scored = ~np.isnan(m)
    correct = np.where(scored, m, 0.0) >= CORRECT_AT
    for i in range(k):
        for j in range(i, k):
            both = scored[i] & scored[j]
            kappas[i, j] = kappas[j, i] = cohen_kappa(correct[i, both], correct[j, both])
            counts[i, j] = counts[j, i] = int(both.sum())
    return kappas, counts


def outcome_table(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[int, int, int, int]:
    """(both correct, only a, only b, neither) over the items both were scored on (MADQA H.4's
    "54 solved only by humans and 53 only by the model")."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both = ~np.isnan(x) & ~np.isnan(y)
    cx, cy = x[both] >= CORRECT_AT, y[both] >= CORRECT_AT
    return int((cx & cy).sum()), int((cx & ~cy).sum()), int((~cx & cy).sum()), int((~cx & ~cy).sum())
