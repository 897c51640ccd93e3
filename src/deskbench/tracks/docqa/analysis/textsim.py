"""TF-IDF vectors and cosine distances with numpy: the light default text similarity of the
analyses (query drift, semantic distance of evidence pages). The paper embeds with Snowflake Arctic
Embed; that needs torch, so any `Embedder` (texts -> rows of vectors) can be passed instead.

TF-IDF here is raw term counts times the smoothed idf ln((1 + N) / (1 + df)) + 1, the common
convention (a term in every text keeps weight 1, so identical texts still have distance 0).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from deskbench.analysis.stats import pearson
from deskbench.tracks.docqa.agents.lexical import STOPWORDS

Embedder = Callable[[Sequence[str]], npt.NDArray[np.float64]]

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords (query operators AND/OR/NOT fall out too, so
    'a AND b' and 'a b' are the same query)."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS and w != "not"]


def tfidf_matrix(texts: Sequence[str]) -> npt.NDArray[np.float64]:
    """One TF-IDF row per text, the idf fitted on `texts` themselves (the run's queries, or the
    evidence pages being compared), columns in sorted vocabulary order."""
    tokenised = [Counter(words(t)) for t in texts]
    vocab = sorted({w for c in tokenised for w in c})
    col = {w: j for j, w in enumerate(vocab)}
    n = len(texts)
    tf = np.zeros((n, len(vocab)))
    for i, counts in enumerate(tokenised):
        for w, k in counts.items():
            tf[i, col[w]] = k
    df = (tf > 0).sum(axis=0)
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    return np.asarray(tf * idf, dtype=np.float64)


def cosine_distance(u: npt.NDArray[np.float64], v: npt.NDArray[np.float64]) -> float:
    """1 - cos(u, v). An empty vector (a text of stopwords only) shares nothing: distance 1,
    unless both are empty (then 0: the texts do not differ in any counted word)."""
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0.0 or nv == 0.0:
        return 0.0 if nu == nv else 1.0
    return float(min(2.0, max(0.0, 1.0 - float(np.dot(u, v)) / (nu * nv))))


def pearson_r(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson r; None with fewer than 3 pairs or a constant column (r is undefined there).
    With a 0/1 column this is the point-biserial correlation."""
    if len(x) != len(y) or len(x) < 3:
        return None
    r = pearson(x, y)
    return None if math.isnan(r) else r


def correlation_p(r: float | None, n: int) -> float | None:
    """Two-sided p-value of a Pearson r over n pairs (t test with n - 2 degrees of freedom)."""
    if r is None or n < 3:
        return None
    from scipy.stats import t as student_t

    if abs(r) >= 1.0:
        return 0.0
    tstat = r * math.sqrt((n - 2) / (1.0 - r * r))
    return float(2.0 * student_t.sf(abs(tstat), n - 2))
