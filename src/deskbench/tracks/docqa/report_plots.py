"""docqa's report figures as PNG bytes: the Kuiper curves, accuracy within a step budget and the
error decomposition (MADQA Figures 6-10)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from matplotlib.ticker import MaxNLocator

from deskbench.analysis.plotting import pyplot
from deskbench.report.plots import empty as _empty
from deskbench.report.plots import png as _png
from deskbench.tracks.docqa.report_curves import BudgetCurve, ErrorBreakdown, KuiperCurve
from deskbench.tracks.docqa.taxonomy import ERROR_CLASSES

COLORS = {"retrieval": "#d62728", "navigation": "#ff7f0e", "comprehension": "#1f77b4", "refusal": "#7f7f7f"}


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
