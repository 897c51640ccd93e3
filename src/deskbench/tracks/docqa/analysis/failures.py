"""Where systems fail (MADQA Appendix H.3, Figures 16-19), with the paper's error taxonomy
(tracks/docqa/taxonomy.py): an item is correct at accuracy >= 0.5; every incorrect one is a refusal (an
empty response; checked first), a retrieval failure (Doc F1 = 0), a navigation failure (Doc F1 > 0,
Page F1 = 0) or a comprehension failure (Page F1 > 0). Unscored items (a failed judge call) are in
no count. Shares are of all predictions (the paper's "21.4% of all predictions").

- Figure 16: each system's retrieval and comprehension failure rates.
- Figure 17: the classes by hop type (single, cross_page, cross_doc); Figure 18: by document
  domain. Per system, and pooled over the `top` most accurate systems (the paper: top four),
  counting item x system pairs.
- Figure 19: the failure cascade, "total questions -> document found -> correct page found ->
  correct answer": items with Doc F1 > 0, with Page F1 > 0, and correct with Page F1 > 0 (each
  stage inside the one before; a correct answer that cites no evidence page is counted apart, in
  `correct_without_page`), beside the decomposition of every prediction into correct and the four
  classes (the figure's bar).

Scored with a judge (`--judge`), the correct items are split as MADQA's Figure 8 splits them, as the
report's error table does: exact (score 1: exact under ANLS*, or the judge's "correct") and verbose
(the judge's "partial", 0.5: right content with a format or verbosity issue), with the judge's
`main_issue` of each verbose one counted. Without a judge every correct item scores 1 and no split
is made (the fields are null).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.scored import CORRECT_AT, ScoredSystem, is_correct
from deskbench.tracks.docqa.tasks import HOP_TYPES, ItemScore
from deskbench.tracks.docqa.taxonomy import ERROR_CLASSES

TOP = 4  # systems pooled for Figures 17-18 (the paper's "top-4 systems")
NO_DOMAIN = "(none)"


class Breakdown(BaseModel):
    """Predictions of one group: how many were correct and how many fell in each error class."""

    n: int
    correct: int
    accuracy: float | None  # correct / n; None for no predictions
    counts: dict[str, int]  # error class -> count, every class present
    # Figure 8, with a judge only (null without): correct = exact + verbose
    exact: int | None = None  # score 1
    verbose: int | None = None  # the judge's partial (0.5)
    verbose_issues: dict[str, int] | None = None  # the judge's main_issue of the verbose ones

    def share(self, cls: str) -> float | None:
        return self.counts[cls] / self.n if self.n else None


class Cascade(BaseModel):
    """Figure 19's funnel: each stage a subset of the one before."""

    n: int
    doc_found: int  # Doc F1 > 0
    page_found: int  # Page F1 > 0
    correct: int  # correct and Page F1 > 0
    correct_without_page: int  # correct, but no evidence page cited (outside the funnel)


class SystemFailures(BaseModel):
    system: str
    accuracy: float | None  # share correct (accuracy >= 0.5)
    overall: Breakdown
    retrieval_rate: float | None  # Figure 16, x: retrieval failures / predictions
    comprehension_rate: float | None  # Figure 16, y
    by_hop_type: dict[str, Breakdown]
    by_domain: dict[str, Breakdown]
    cascade: Cascade


class FailuresReport(BaseModel):
    correct_at: float
    classes: list[str]
    systems: list[SystemFailures]
    top: list[str]  # the systems pooled below, most accurate first
    top_by_hop_type: dict[str, Breakdown]
    top_by_domain: dict[str, Breakdown]
    scoring: AnalysisScoring | None = None  # what decided correctness (set by load_failures)


def _label(system: ScoredSystem, item: ItemScore) -> str:
    """'correct' or the item's error class."""
    from deskbench.tracks.docqa.taxonomy import classify

    return "correct" if is_correct(item) else classify(item, system.answer(item.id))


def _counted(system: ScoredSystem) -> list[tuple[ItemScore, str]]:
    return [(i, _label(system, i)) for i in system.items if i.status == "missing" or i.accuracy is not None]


def _breakdown(pairs: Iterable[tuple[ItemScore, str]], judged: bool = False) -> Breakdown:
    """Counts of one group; `judged`: also the correct ones split into exact and verbose (Fig. 8)."""
    counts: dict[str, int] = dict.fromkeys(ERROR_CLASSES, 0)
    n = correct = exact = 0
    issues: dict[str, int] = {}
    for item, label in pairs:
        n += 1
        if label != "correct":
            counts[label] += 1
            continue
        correct += 1
        if item.accuracy is not None and item.accuracy >= 1.0:
            exact += 1
        else:
            issue = item.judge_issue or "(none given)"
            issues[issue] = issues.get(issue, 0) + 1
    return Breakdown(n=n, correct=correct, accuracy=correct / n if n else None, counts=counts,
                     exact=exact if judged else None, verbose=correct - exact if judged else None,
                     verbose_issues=dict(sorted(issues.items())) if judged else None)


def _by(pairs: Sequence[tuple[ItemScore, str]], key: str, order: Sequence[str] = (),
        judged: bool = False) -> dict[str, Breakdown]:
    groups: dict[str, list[tuple[ItemScore, str]]] = {k: [] for k in order}
    for item, label in pairs:
        value = getattr(item, key) or NO_DOMAIN
        groups.setdefault(value, []).append((item, label))
    keys = list(order) + sorted((k for k in groups if k not in order), key=lambda k: (k == NO_DOMAIN, k))
    return {k: _breakdown(groups[k], judged) for k in keys}


def system_failures(system: ScoredSystem, judged: bool = False) -> SystemFailures:
    pairs = _counted(system)
    overall = _breakdown(pairs, judged)
    cascade = Cascade(
        n=len(pairs), doc_found=sum(i.doc_f1 > 0 for i, _ in pairs), page_found=sum(i.page_f1 > 0 for i, _ in pairs),
        correct=sum(i.page_f1 > 0 and label == "correct" for i, label in pairs),
        correct_without_page=sum(i.page_f1 == 0 and label == "correct" for i, label in pairs))
    return SystemFailures(
        system=system.label, accuracy=overall.accuracy, overall=overall,
        retrieval_rate=overall.share("retrieval"), comprehension_rate=overall.share("comprehension"),
        by_hop_type=_by(pairs, "hop_type", HOP_TYPES, judged), by_domain=_by(pairs, "domain", judged=judged),
        cascade=cascade)


def failures_report(systems: Sequence[ScoredSystem], top: int = TOP, judged: bool = False) -> FailuresReport:
    """Every system's failures and the top systems pooled; `judged`: scored by a judge, so the
    correct items are split into exact and verbose."""
    per = [system_failures(s, judged) for s in systems]
    ranked = sorted(zip(systems, per, strict=True), key=lambda sp: (-(sp[1].accuracy or 0.0), sp[1].system))[:top]
    pooled = [pair for s, _ in ranked for pair in _counted(s)]
    return FailuresReport(correct_at=CORRECT_AT, classes=list(ERROR_CLASSES), systems=per,
                          top=[f.system for _, f in ranked],
                          top_by_hop_type=_by(pooled, "hop_type", HOP_TYPES, judged),
                          top_by_domain=_by(pooled, "domain", judged=judged))


def load_failures(run_dirs: Sequence[Path], pool_humans: bool = False, top: int = TOP,
                  judging: Judging | None = None) -> FailuresReport:
    from deskbench.tracks.docqa.analysis.scored import load_scored

    judging = judging or Judging()
    report = failures_report(load_scored(run_dirs, pool_humans, judging), top, judged=judging.judged)
    report.scoring = judging.summary()
    return report


COLORS = {"correct": "#2ca02c", "exact": "#2ca02c", "verbose": "#98df8a", "retrieval": "#d62728",
          "navigation": "#ff7f0e", "comprehension": "#1f77b4", "refusal": "#7f7f7f"}


def _count(b: Breakdown, cls: str) -> int:
    """One segment of a bar: correct, its exact or verbose part (judged), or an error class."""
    if cls in ("correct", "exact", "verbose"):
        return {"correct": b.correct, "exact": b.exact or 0, "verbose": b.verbose or 0}[cls]
    return b.counts[cls]


def _stacked(ax: Any, groups: dict[str, Breakdown], horizontal: bool = False) -> None:
    names = [k for k, b in groups.items() if b.n]
    start = [0.0] * len(names)
    judged = any(groups[k].exact is not None for k in names)
    for cls in (*(("exact", "verbose") if judged else ("correct",)), *ERROR_CLASSES):
        widths = [100 * _count(groups[k], cls) / groups[k].n for k in names]
        if horizontal:
            ax.barh(names, widths, left=start, color=COLORS[cls], label=cls)
        else:
            ax.bar(names, widths, bottom=start, color=COLORS[cls], label=cls)
        start = [a + w for a, w in zip(start, widths, strict=True)]


def failures_figure(report: FailuresReport) -> Any:
    """Figures 16-19 in one: the retrieval / comprehension scatter, the classes by hop type and by
    domain (top systems pooled), and each system's predictions by stage."""
    from deskbench.analysis.plotting import pyplot

    fig, axes = pyplot().subplots(2, 2, figsize=(12, 8.5))
    ax = axes[0][0]
    for s in report.systems:
        if s.retrieval_rate is not None and s.comprehension_rate is not None:
            ax.scatter(100 * s.retrieval_rate, 100 * s.comprehension_rate, color="#4878a8")
            ax.annotate(s.system, (100 * s.retrieval_rate, 100 * s.comprehension_rate), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("retrieval failure (% of predictions)")
    ax.set_ylabel("comprehension failure (% of predictions)")
    ax.set_title("Retrieval vs comprehension (Fig. 16)", fontsize=10)
    top = ", ".join(report.top)
    for ax, groups, title in ((axes[0][1], report.top_by_hop_type, "By hop type (Fig. 17)"),
                              (axes[1][0], report.top_by_domain, "By domain (Fig. 18)")):
        _stacked(ax, groups)
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of predictions")
        ax.set_title(f"{title}\npooled: {top}", fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    ax = axes[1][1]
    _stacked(ax, {s.system: s.overall for s in report.systems}, horizontal=True)
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("% of predictions")
    ax.set_title("Predictions by stage (Fig. 19)", fontsize=10)
    ax.tick_params(axis="y", labelsize=7)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=len(labels), fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
