"""The deliverables diagnostics on graded rows (consulting paper §4.10-4.11): sole-cause
attribution (Table 15 and the §4.10.2 funnel) and the VRS weight sensitivity (Table 18). Moved
out of the core's statistics (analysis/stats.py keeps the track-neutral tests) because they read
the rubric's codes and the VRS rule."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from deskbench.analysis.stats import jaccard
from deskbench.tracks.deliverables.scoring.vrs import (
    PAPER_WEIGHTINGS,
    GradedRow,
    Weighting,
    accept,
    vrs_weighted,
)
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

_V_MIN = 80.0
_PASS = 2  # a rubric "passes" at >= 2 (Table 16); sole-cause failures are single scores below it


def _sole_cause_code(row: GradedRow) -> str | None:
    """The criterion a rejected response failed on alone (§4.10.2), else None."""
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
    counts: dict[str, int] = dict.fromkeys(RUBRIC_CODES, 0)
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
