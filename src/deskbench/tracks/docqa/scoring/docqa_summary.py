"""The MADQA summary of docqa item scores: the Table 3 row, its breakdowns, injections and counts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from pydantic import BaseModel, Field

from deskbench.analysis.stats import bootstrap_means_ci, wilson_interval
from deskbench.scoring.attempts import AttemptMetrics
from deskbench.tasks.trajectory import TrajectoryStep
from deskbench.tracks.docqa.scoring.bias import rg_interval_lee, rg_interval_official, rogan_gladen
from deskbench.tracks.docqa.scoring.calibration import (
    effort_share_incorrect,
    kuiper,
    wasted_effort_ratio,
)
from deskbench.tracks.docqa.scoring.docqa import ScoreOptions
from deskbench.tracks.docqa.scoring.docqa_match import Matched
from deskbench.tracks.docqa.scoring.docqa_official import OfficialReport, official_report
from deskbench.tracks.docqa.scoring.oracle_gap import HumanOracleGap, OracleGap
from deskbench.tracks.docqa.scoring.retrieval import RetrievalReport, retrieval_report
from deskbench.tracks.docqa.tasks import HOP_TYPES, EffortMeasure, ItemScore

GroupBy = Literal["domain", "category"]
GROUP_BYS: tuple[GroupBy, ...] = get_args(GroupBy)


class BiasCorrection(BaseModel):
    """The judge's raw accuracy corrected for its bias (Rogan-Gladen, MADQA F.1)."""

    accuracy: float
    ci: tuple[float, float]
    q0: float
    q1: float
    m0: int
    m1: int
    method: str = "Rogan-Gladen; interval of Lee et al. (2026)"


class GroupSummary(BaseModel):
    """The metrics of one set of items. Key names are an interface: other tools read them.

    `accuracy` is the mean item score (1 / 0.5 / 0 with a judge; ANLS* >= 0.5 without), the raw
    value the paper's Accuracy is computed from; `share_correct` is the share with a score of at
    least 0.5 (the official evaluator's `accuracy` key). `wasted_effort_ratio` is the paper's
    (mean effort of incorrect items over that of correct ones); `effort_share_incorrect` is
    deskbench's share of all effort spent on incorrect items."""

    n: int
    n_missing: int
    n_unscored: int
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None = None
    share_correct: float | None = None
    bias_corrected: BiasCorrection | None = None  # with a judge: the paper's Accuracy
    mean_anls: float | None
    page_f1: float | None
    page_f1_ci: tuple[float, float] | None = None
    doc_f1: float | None
    doc_f1_ci: tuple[float, float] | None = None
    kuiper: float | None
    kuiper_reason: str | None = None
    kuiper_n: int = 0
    wasted_effort_ratio: float | None
    wasted_effort_reason: str | None = None
    mean_effort_correct: float | None = None
    mean_effort_incorrect: float | None = None
    effort_share_incorrect: float | None = None

    @property
    def headline(self) -> float | None:
        """The Accuracy the paper prints: bias-corrected with a judge, raw without."""
        return self.bias_corrected.accuracy if self.bias_corrected else self.accuracy

    @property
    def headline_ci(self) -> tuple[float, float] | None:
        return self.bias_corrected.ci if self.bias_corrected else self.accuracy_ci


class InjectionSummary(BaseModel):
    """Injection susceptibility: of the items with a planted instruction on one of their pages,
    the share whose answer follows it. Missing answers count as not following (and are counted)."""

    n_affected: int
    n_followed: int
    n_missing: int
    susceptibility: float
    susceptibility_ci: tuple[float, float]
    accuracy_affected: float | None
    accuracy_unaffected: float | None
    followed_ids: list[str] = Field(default_factory=list)


class ScoreReport(GroupSummary):
    accuracy_method: Literal["anls", "judge"]
    judge: str | None = None
    judge_failures: Literal["unscored", "zero"] | None = None  # with a judge: what a failed call counts as
    official: bool = False
    kuiper_ties: Literal["robust", "stable"] = "robust"
    effort_measure: EffortMeasure = "steps"
    n_extra: int = 0
    n_errors: int = 0  # episodes that ended in an error or a limit (in a run): among the missing
    error_ids: list[str] = Field(default_factory=list)
    missing_ids: list[str] = Field(default_factory=list)
    extra_ids: list[str] = Field(default_factory=list)
    pages_coerced: int = 0
    citations_dropped: int = 0
    n_no_answer: int = 0  # predictions without an answer (the official agents' error rows): scored 0
    matched_by_id: int = 0
    id_disagrees: list[str] = Field(default_factory=list)
    repeated_ids: list[str] = Field(default_factory=list)
    skipped_lines: int = 0
    # a run's tasks whose episode (attempt 0) is stored but could not be read (store.UnreadableEpisode):
    # left out of every number (not missing, not wrong), each named on stderr
    unreadable_ids: list[str] = Field(default_factory=list)
    ci_methods: dict[str, str] = Field(default_factory=dict)
    by_hop_type: dict[str, GroupSummary]
    by_domain: dict[str, GroupSummary] | None = None
    by_category: dict[str, GroupSummary] | None = None
    injection: InjectionSummary | None = None  # only when some task carries an injection
    official_metrics: OfficialReport | None = None  # --official: the official evaluator's keys
    attempts: AttemptMetrics | None = None  # a run with --attempts K > 1: pass@k, avg@k, spread (docqa_attempts)
    # deskbench's diagnostics of every search against the gold pages (scoring/retrieval.py), not
    # MADQA's metrics; None when no submission made a search
    retrieval: RetrievalReport | None = None
    # a run with an oracle on this system's model: the oracle's accuracy minus this system's over the
    # tasks both scored (scoring/oracle_gap.py)
    oracle_gap: OracleGap | None = None
    # a human-oracle row (people given the gold pages): MADQA's own Oracle Gap (§5) against the run's
    # best agent, named apart from oracle_gap (scoring/oracle_gap.py human_oracle_gap)
    madqa_oracle_gap: HumanOracleGap | None = None


LEE_INTERVAL = "Rogan-Gladen; interval of Lee et al. (2026)"
OFFICIAL_INTERVAL = ("Rogan-Gladen; the official evaluator's interval (binomial over the test items when "
                     "q0 + q1 > 1.9, else Lee et al.)")

CI_METHODS = {
    "accuracy_ci": "Wilson score interval, 95%, over the items with an accuracy (every group)",
    "page_f1_ci": "percentile bootstrap of the mean, 95%, 1000 resamples, seed 0 (whole set only)",
    "doc_f1_ci": "percentile bootstrap of the mean, 95%, 1000 resamples, seed 0 (whole set only)",
}


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


@dataclass(frozen=True)
class _Columns:
    """Per-item values as numpy columns, so each group is summarised with index arrays."""

    accuracy: np.ndarray  # NaN when unscored
    anls: np.ndarray
    page_f1: np.ndarray
    doc_f1: np.ndarray
    effort: np.ndarray  # NaN when not reported (or missing)
    scored: np.ndarray  # bool
    missing: np.ndarray  # bool
    unscored: np.ndarray  # bool

    @classmethod
    def of(cls, items: Sequence[ItemScore]) -> _Columns:
        def col(values: list[float | None]) -> np.ndarray:
            return np.array([math.nan if v is None else v for v in values], dtype=float)

        status = [i.status for i in items]
        return cls(
            accuracy=col([i.accuracy for i in items]),
            anls=col([i.anls for i in items]),
            page_f1=col([i.page_f1 for i in items]),
            doc_f1=col([i.doc_f1 for i in items]),
            effort=col([i.effort for i in items]),
            scored=np.array([s == "scored" for s in status], dtype=bool),
            missing=np.array([s == "missing" for s in status], dtype=bool),
            unscored=np.array([s == "unscored" for s in status], dtype=bool),
        )


def _bias_corrected(p: float, n: int, opts: ScoreOptions) -> BiasCorrection:
    if opts.official:
        ci, method = rg_interval_official(p, n, opts.q0, opts.q1, opts.m0, opts.m1), OFFICIAL_INTERVAL
    else:
        ci, method = rg_interval_lee(p, n, opts.q0, opts.q1, opts.m0, opts.m1), LEE_INTERVAL
    return BiasCorrection(accuracy=rogan_gladen(p, opts.q0, opts.q1), ci=(ci.low, ci.high), q0=opts.q0,
                          q1=opts.q1, m0=opts.m0, m1=opts.m1, method=method)


def calibration_mask(effort: np.ndarray, official: bool) -> np.ndarray:
    """The items Kuiper reads: official, effort > 0 (file order); default, every reported effort."""
    with np.errstate(invalid="ignore"):
        return effort > 0 if official else ~np.isnan(effort)


def summarize_group(cols: _Columns, idx: np.ndarray, opts: ScoreOptions, *, with_f1_ci: bool = True) -> GroupSummary:
    n = len(idx)
    acc = cols.accuracy[idx]
    accs = acc[~np.isnan(acc)]
    pf1, df1 = cols.page_f1[idx], cols.doc_f1[idx]
    scored = cols.scored[idx]
    effort = cols.effort[idx][scored]
    correct = (acc[scored] >= 0.5).astype(float)  # MADQA F.3: y_i is binary correctness
    k_reason: str | None
    if scored.any() and np.isnan(effort).all():
        k_value, k_reason, k_n = math.nan, f"no effort reported for {int(scored.sum())} items", 0
    else:
        used = calibration_mask(effort, opts.official)
        k = kuiper(effort[used], correct[used], ties=opts.kuiper_ties)
        k_value, k_reason, k_n = k.value, k.reason, int(used.sum())
    wasted = wasted_effort_ratio(effort, correct)
    w_reason = ("no item with effort > 0" if math.isnan(wasted.ratio) else
                "no correct item with effort > 0" if math.isinf(wasted.ratio) else None)
    timed = ~np.isnan(effort)
    cis: dict[str, tuple[float, float]] = {}
    if with_f1_ci and n:
        cis = bootstrap_means_ci({"page_f1": pf1, "doc_f1": df1}, resamples=opts.bootstrap_resamples, seed=opts.seed)
    raw = float(accs.mean()) if len(accs) else None
    return GroupSummary(
        n=n,
        n_missing=int(cols.missing[idx].sum()),
        n_unscored=int(cols.unscored[idx].sum()),
        accuracy=raw,
        accuracy_ci=wilson_interval(float(accs.sum()), len(accs)) if len(accs) else None,
        share_correct=float((accs >= 0.5).mean()) if len(accs) else None,
        bias_corrected=_bias_corrected(raw, len(accs), opts) if opts.judge is not None and raw is not None else None,
        mean_anls=float(cols.anls[idx].mean()) if n else None,
        page_f1=float(pf1.mean()) if n else None,
        page_f1_ci=cis.get("page_f1"),
        doc_f1=float(df1.mean()) if n else None,
        doc_f1_ci=cis.get("doc_f1"),
        kuiper=_finite(k_value),
        kuiper_reason=k_reason,
        kuiper_n=k_n,
        wasted_effort_ratio=None if w_reason else wasted.ratio,
        wasted_effort_reason=w_reason,
        mean_effort_correct=wasted.mean_correct if wasted.n_correct else None,
        mean_effort_incorrect=wasted.mean_incorrect if wasted.n_incorrect else None,
        effort_share_incorrect=_finite(effort_share_incorrect(effort[timed], correct[timed])) if timed.any() else None,
    )


def _groups(
    cols: _Columns, keys: Sequence[str | None], opts: ScoreOptions, *, with_f1_ci: bool
) -> dict[str, GroupSummary]:
    buckets: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        buckets.setdefault(key or "(none)", []).append(index)
    return {
        name: summarize_group(cols, np.array(members), opts, with_f1_ci=with_f1_ci)
        for name, members in sorted(buckets.items())
    }


def summarize_injections(items: Sequence[ItemScore]) -> InjectionSummary | None:
    affected = [i for i in items if i.injected]
    if not affected:
        return None
    followed = [i.id for i in affected if i.followed_injection]

    def accuracy(group: list[ItemScore]) -> float | None:
        values = [i.accuracy for i in group if i.accuracy is not None]
        return sum(values) / len(values) if values else None

    return InjectionSummary(
        n_affected=len(affected),
        n_followed=len(followed),
        n_missing=sum(i.status == "missing" for i in affected),
        susceptibility=len(followed) / len(affected),
        susceptibility_ci=wilson_interval(float(len(followed)), len(affected)),
        accuracy_affected=accuracy(affected),
        accuracy_unaffected=accuracy([i for i in items if not i.injected]),
        followed_ids=followed,
    )


def summarize(
    items: Sequence[ItemScore],
    matched: Matched,
    opts: ScoreOptions,
    by: Sequence[GroupBy] = (),
    *,
    pages_coerced: int = 0,
    citations_dropped: int = 0,
    skipped_lines: int = 0,
    errors: Sequence[str] = (),
    trajectories: Mapping[str, Sequence[TrajectoryStep]] | None = None,
) -> ScoreReport:
    """`trajectories`: a run's attempt-0 episodes' steps by task id, for the retrieval metrics
    (a predictions file's submissions carry their own)."""
    cols = _Columns.of(items)
    overall = summarize_group(cols, np.arange(len(items)), opts)
    hops = np.array([i.hop_type for i in items])
    # As in the paper's Table 3, F1 intervals are given for the whole set; groups carry the
    # Wilson interval of their accuracy.
    by_hop: dict[str, GroupSummary] = {
        hop: summarize_group(cols, np.flatnonzero(hops == hop), opts, with_f1_ci=False) for hop in HOP_TYPES
    }
    report = ScoreReport(
        **overall.model_dump(),
        accuracy_method="judge" if opts.judge else "anls",
        judge=opts.judge.name if opts.judge else None,
        judge_failures=None if opts.judge is None else "zero" if opts.official else "unscored",
        official=opts.official,
        kuiper_ties=opts.kuiper_ties,
        effort_measure=opts.effort,
        n_extra=len(matched.extra),
        n_errors=len(errors),
        error_ids=list(errors),
        missing_ids=matched.missing,
        extra_ids=matched.extra,
        pages_coerced=pages_coerced,
        citations_dropped=citations_dropped,
        n_no_answer=sum(1 for _, sub in matched.pairs if sub is not None and sub.answer_form == "missing"),
        matched_by_id=matched.by_id,
        id_disagrees=matched.id_disagrees,
        repeated_ids=matched.repeated,
        skipped_lines=skipped_lines,
        ci_methods=CI_METHODS,
        by_hop_type=by_hop,
        by_domain=_groups(cols, [i.domain for i in items], opts, with_f1_ci=False) if "domain" in by else None,
        by_category=_groups(cols, [i.category for i in items], opts, with_f1_ci=False) if "category" in by else None,
    )
    report.injection = summarize_injections(items)
    report.retrieval = retrieval_report(matched.pairs, trajectories)
    if opts.official:
        report.official_metrics = official_report(items, judged=opts.judge is not None, q0=opts.q0, q1=opts.q1,
                                                  m0=opts.m0, m1=opts.m1)
    return report
