"""The report's figures as PNG bytes (matplotlib Agg), so the page can embed them as data URIs
and render with no network and no files beside it."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from typing import Any

from matplotlib.ticker import MaxNLocator

from deskbench.analysis.plotting import pyplot
from deskbench.report.models import ERROR_CLASSES, BudgetCurve, ErrorBreakdown, KuiperCurve
from deskbench.tracks.analytics.scoring.analytics_metrics import AnalyticsScoreReport
from deskbench.tracks.deliverables.scoring.deliverables_report import DeliverablesReport

COLORS = {"retrieval": "#d62728", "navigation": "#ff7f0e", "comprehension": "#1f77b4", "refusal": "#7f7f7f"}


def _png(fig: Any) -> bytes:
    plt = pyplot()
    try:
        buf = io.BytesIO()
        # No timestamp or software metadata: the same report gives the same bytes.
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
        return buf.getvalue()
    finally:
        plt.close(fig)


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555")


def kuiper_png(curves: Sequence[KuiperCurve]) -> bytes:
    """Cumulative difference D_k against the share of items sorted by effort (Figures 6, 10)."""
    fig, ax = pyplot().subplots(figsize=(7, 4))
    drawn = [c for c in curves if c.curve]
    for c in drawn:
        k = "–" if c.kuiper is None else f"{c.kuiper:.1f}"
        ax.plot(c.share, c.curve, marker="o", markersize=3, label=f"{c.label} (K = {k})")
    if drawn:
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no system with varying effort")
    ax.axhline(0, color="#999", linewidth=0.8)
    ax.set_xlabel("share of items, sorted by effort (steps)")
    ax.set_ylabel("cumulative difference D (items)")
    ax.set_title("Effort calibration")
    fig.tight_layout()
    return _png(fig)


def budget_png(curves: Sequence[BudgetCurve]) -> bytes:
    """Accuracy at step limit N (Figure 9)."""
    fig, ax = pyplot().subplots(figsize=(7, 4))
    for c in curves:
        ax.plot(c.budgets, [100 * a for a in c.accuracy], marker="o", markersize=3, label=c.label)
    if curves:
        ax.legend(fontsize=8)
    budgets = [b for c in curves for b in c.budgets]
    if budgets:
        ax.set_xlim(min(budgets) - 0.5, max(budgets) + 0.5)
        if len(set(budgets)) <= 20:
            ax.set_xticks(sorted(set(budgets)))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step limit N")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy within a step budget")
    fig.tight_layout()
    return _png(fig)


def errors_png(breakdowns: Sequence[ErrorBreakdown]) -> bytes:
    """Stacked bars: each error class as a share of all items (Figure 8)."""
    fig, ax = pyplot().subplots(figsize=(8, 0.7 * max(len(breakdowns), 2) + 1.4))
    labels = [textwrap.fill(b.label, 28) for b in breakdowns]  # long names would squeeze the bars
    left = [0.0] * len(breakdowns)
    for cls in ERROR_CLASSES:
        widths = [100 * b.share(cls) for b in breakdowns]
        ax.barh(labels, widths, left=left, color=COLORS[cls], label=cls)
        left = [a + w for a, w in zip(left, widths, strict=True)]
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of all items (the rest are correct)")
    ax.invert_yaxis()
    ax.legend(fontsize=8, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    return _png(fig)


ANALYTICS_CATEGORIES = ("qa", "visualization", "file_generation")
ANALYTICS_TITLES = {"qa": "QA", "visualization": "Data Vis.", "file_generation": "File Gen."}


def analytics_pass_png(reports: Sequence[AnalyticsScoreReport]) -> bytes:
    """pass@1 (solid) and pass@k (light) per category and system, as in Table 1."""
    import numpy as np

    fig, ax = pyplot().subplots(figsize=(8, 4))
    groups = ["overall", *ANALYTICS_CATEGORIES]
    width = 0.8 / max(len(reports), 1)
    x = np.arange(len(groups))
    for i, r in enumerate(reports):
        metrics = [r.overall, *(r.by_category.get(c) for c in ANALYTICS_CATEGORIES)]
        p1 = [100 * (m.pass1 or 0) if m else 0 for m in metrics]
        pk = [100 * (m.passk or 0) if m else 0 for m in metrics]
        bars = ax.bar(x + i * width, pk, width, alpha=0.35)
        ax.bar(x + i * width, p1, width, color=bars[0].get_facecolor()[:3], label=textwrap.fill(r.system, 40))
    ax.set_xticks(x + width * (len(reports) - 1) / 2, ["Overall", *(ANALYTICS_TITLES[c] for c in ANALYTICS_CATEGORIES)])
    ax.set_ylim(0, 100)
    ax.set_ylabel("score (%)")
    ax.set_title("pass@1 (solid) and pass@k (light)")
    if reports:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def analytics_errors_png(reports: Sequence[AnalyticsScoreReport]) -> bytes:
    """Share of each error type among the bad cases of each category (Figure 4's heatmaps)."""
    from deskbench.tracks.analytics.scoring.analytics import ERROR_CATEGORIES

    fig, axes = pyplot().subplots(1, 3, figsize=(11, 0.5 * max(len(reports), 2) + 1.8), sharey=True)
    for ax, cat in zip(axes, ANALYTICS_CATEGORIES, strict=True):
        grid = []
        for r in reports:
            counts = r.errors.get(cat, {})
            total = sum(counts.values())
            grid.append([100 * counts.get(e, 0) / total if total else 0.0 for e in ERROR_CATEGORIES])
        ax.imshow(grid or [[0.0] * len(ERROR_CATEGORIES)], cmap="Reds", vmin=0, vmax=100, aspect="auto")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(ERROR_CATEGORIES)), [e.replace("_", " ") for e in ERROR_CATEGORIES],
                      rotation=35, ha="right", fontsize=7)
        ax.set_title(ANALYTICS_TITLES[cat], fontsize=9)
    axes[0].set_yticks(range(len(reports)), [textwrap.fill(r.system, 30) for r in reports], fontsize=7)
    fig.tight_layout()
    return _png(fig)


def deliverables_class_png(report: DeliverablesReport) -> bytes:
    """Mean strict VRS per prompt class and system (the consulting paper's Table 7 as bars);
    a class a system has no graded item in gets no bar."""
    import numpy as np

    fig, ax = pyplot().subplots(figsize=(8, 4))
    classes = [row.prompt_class for row in report.by_class]
    systems = report.systems
    width = 0.8 / max(len(systems), 1)
    x = np.arange(len(classes))
    drawn = False
    for i, system in enumerate(systems):
        cells = [(k, row.cells[system]) for k, row in enumerate(report.by_class)]
        shown = [(k, c.vrs_strict) for k, c in cells if c.vrs_strict is not None]
        if shown:
            drawn = True
            ax.bar([x[k] + i * width for k, _ in shown], [v for _, v in shown], width,
                   label=textwrap.fill(system, 40))
    if drawn:
        ax.set_xticks(x + width * (len(systems) - 1) / 2, classes)
        ax.legend(fontsize=7)
    else:
        ax.set_xticks([])
        _empty(ax, "no rubric grades")
    ax.set_ylim(0, 100)
    ax.set_ylabel("mean strict VRS (0-100)")
    ax.set_title("Strict VRS by prompt class")
    fig.tight_layout()
    return _png(fig)
