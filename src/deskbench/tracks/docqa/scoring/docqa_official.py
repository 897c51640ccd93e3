"""The official MADQA evaluator's summary, key for key (github OxRML/MADQA, eval/evaluate.py
`aggregate_metrics` and `evaluate_file`, commit 978fa76), computed from deskbench's item scores.

`deskbench score --official --json` carries it as `official_metrics`, so a researcher can set it
beside the official script's `--json` output: the same keys (`accuracy` there is the share of items
with a score >= 0.5; `mean_semantic` the bias-corrected mean score with a judge, else mean ANLS*),
the same groups (hop types present, category 'Unknown' and domain 'Other' for a blank) and the same
JSON rule for undefined values (NaN and inf are null).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel

from deskbench.tracks.docqa.scoring.bias import rg_interval_official, rogan_gladen
from deskbench.tracks.docqa.scoring.calibration import kuiper, wasted_effort_ratio
from deskbench.tracks.docqa.tasks import ItemScore


class OfficialMetrics(BaseModel):
    """One group, as `aggregate_metrics` returns it."""

    n: int
    accuracy: float
    mean_anls: float
    mean_semantic: float
    semantic_ci: tuple[float, float] | None
    doc_f1: float
    page_f1: float
    kuiper_stat: float | None
    kuiper_degenerate: bool
    wasted_effort_ratio: float | None
    mean_steps_correct: float
    mean_steps_incorrect: float


class OfficialReport(BaseModel):
    use_semantic: bool
    overall: OfficialMetrics | None
    by_hop_type: dict[str, OfficialMetrics]
    by_category: dict[str, OfficialMetrics]
    by_domain: dict[str, OfficialMetrics]


def _json_number(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else x


def official_metrics(
    items: Sequence[ItemScore], *, judged: bool, q0: float, q1: float, m0: int, m1: int
) -> OfficialMetrics | None:
    """None for no items (the official code returns {})."""
    if not items:
        return None
    n = len(items)
    scores = np.array([0.0 if i.accuracy is None else i.accuracy for i in items])
    correct = (scores >= 0.5).astype(float)
    anls = float(np.mean([i.anls for i in items]))
    effort = np.array([i.effort or 0.0 for i in items])
    valid = effort > 0
    k = kuiper(effort[valid], correct[valid], ties="stable")
    wasted = wasted_effort_ratio(effort, correct)
    raw = float(scores.mean())
    ci = rg_interval_official(raw, n, q0, q1, m0, m1) if judged else None
    return OfficialMetrics(
        n=n,
        accuracy=float(correct.mean()),
        mean_anls=anls,
        mean_semantic=rogan_gladen(raw, q0, q1) if judged else anls,
        semantic_ci=(ci.low, ci.high) if ci else None,
        doc_f1=float(np.mean([i.doc_f1 for i in items])),
        page_f1=float(np.mean([i.page_f1 for i in items])),
        kuiper_stat=_json_number(k.value),
        kuiper_degenerate=math.isnan(k.value),
        wasted_effort_ratio=_json_number(wasted.ratio),  # inf or undefined: null, as the official --json
        mean_steps_correct=wasted.mean_correct,
        mean_steps_incorrect=wasted.mean_incorrect,
    )


def official_report(
    items: Sequence[ItemScore], *, judged: bool, q0: float, q1: float, m0: int, m1: int
) -> OfficialReport:
    def groups(key: Callable[[ItemScore], str]) -> dict[str, OfficialMetrics]:
        buckets: dict[str, list[ItemScore]] = {}
        for item in items:
            buckets.setdefault(key(item), []).append(item)
        out = {name: official_metrics(members, judged=judged, q0=q0, q1=q1, m0=m0, m1=m1)
               for name, members in sorted(buckets.items())}
        return {name: m for name, m in out.items() if m is not None}

    return OfficialReport(
        use_semantic=judged,
        overall=official_metrics(items, judged=judged, q0=q0, q1=q1, m0=m0, m1=m1),
        by_hop_type=groups(lambda i: i.hop_type),
        by_category=groups(lambda i: i.category or "Unknown"),
        by_domain=groups(lambda i: i.domain or "Other"),
    )
