"""The summary's number helpers shared by its per-system and cross-system tables: an undefined number is None, never NaN."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from deskbench.analysis.stats import Correlation, bootstrap_means_ci, wilson_interval
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.scoring.deliverables_report import CI, Corr, MeanCI, Rate

TIE = 1e-9  # strict VRS values closer than this tie for the per-task argmax


def num(x: float | None) -> float | None:
    """None for an undefined value (None, NaN, +-inf), else the float."""
    return None if x is None or not math.isfinite(x) else float(x)


def _ci(ci: tuple[float, float] | None) -> CI | None:
    if ci is None or num(ci[0]) is None or num(ci[1]) is None:
        return None
    return (float(ci[0]), float(ci[1]))


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def rate(count: int, n: int) -> Rate:
    return Rate(count=count, n=n, rate=count / n if n else None, ci=_ci(wilson_interval(count, n)) if n else None)


def corr(c: Correlation) -> Corr:
    return Corr(rho=num(c.rho), p=num(c.p), n=c.n)


def means_ci(columns: dict[str, list[float]], resamples: int, seed: int) -> dict[str, MeanCI]:
    cis = bootstrap_means_ci(columns, resamples=resamples, seed=seed) if columns else {}
    return {name: MeanCI(mean=mean(vals), ci=_ci(cis.get(name)), n=len(vals)) for name, vals in columns.items()}


def reviewed_rate(items: Iterable[DeliverableItemScore]) -> Rate:
    """Grades QC reviewed, over the items holding a grade (counted, returned or left out)."""
    statuses = [i.grade_status for i in items if i.grade_status is not None]
    return rate(sum(s == "reviewed" for s in statuses), len(statuses))
