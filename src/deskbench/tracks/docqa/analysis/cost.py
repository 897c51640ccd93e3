"""Cost against accuracy (MADQA §5, Figure 7: "performance and cost of running test set
inference"): per system, the leaderboard's accuracy and the USD cost of its scored (attempt-0)
episodes, from deskbench's price table as stored with each episode.

An unknown cost (a model without a price was called) is None, shown "?" and left out of the
plot with a note, never drawn as $0. A system whose episodes record no model usage at all (people,
a prediction file imported without usage) is "not computable": its $0 would mean "not measured".
A model priced at 0 (the local one) is a real $0 and is plotted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.models.prices import PRICES_AS_OF, UNKNOWN, per, total_cost
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.scored import ScoredSystem, accuracy, is_correct


class SystemCost(BaseModel):
    system: str
    n: int  # episodes
    accuracy: float | None
    cost_usd: float | None  # None: unknown or not computable (see reason)
    cost_per_item: float | None
    cost_per_correct: float | None  # per answer with accuracy >= 0.5
    input_tokens: int
    output_tokens: int
    reason: str | None  # why cost_usd is None


class CostReport(BaseModel):
    prices_as_of: str
    systems: list[SystemCost]
    scoring: AnalysisScoring | None = None  # what decided correctness (set by the command)


def system_cost(system: ScoredSystem) -> SystemCost:
    eps = list(system.episodes.values())
    used = [e.usage for e in eps if e.usage.calls or e.usage.input_tokens or e.usage.output_tokens]
    cost = total_cost(e.usage.cost_usd for e in eps)
    reason = None
    if not eps or not used:
        cost, reason = None, "not computable: no model usage recorded"
    elif cost is None:
        reason = f"cost unknown ({UNKNOWN}): a model without a price was called"
    correct = sum(is_correct(i) for i in system.items)
    return SystemCost(
        system=system.label, n=len(eps), accuracy=accuracy(system.items), cost_usd=cost,
        cost_per_item=per(cost, len(eps)), cost_per_correct=per(cost, correct),
        input_tokens=sum(e.usage.input_tokens for e in eps), output_tokens=sum(e.usage.output_tokens for e in eps),
        reason=reason)


def cost_report(systems: Sequence[ScoredSystem]) -> CostReport:
    return CostReport(prices_as_of=PRICES_AS_OF, systems=[system_cost(s) for s in systems])


def load_cost(run_dirs: Sequence[Path], pool_humans: bool = False, judging: Judging | None = None) -> CostReport:
    from deskbench.tracks.docqa.analysis.scored import load_scored

    judging = judging or Judging()
    report = cost_report(load_scored(run_dirs, pool_humans, judging))
    report.scoring = judging.summary()
    return report


def _why_not_shown(s: SystemCost) -> str:
    if s.cost_usd is not None:
        return "no accuracy"
    return "no model usage" if s.reason and s.reason.startswith("not computable") else UNKNOWN


def cost_figure(report: CostReport) -> Any:
    """Figure 7: accuracy against total cost, one point per system; systems without a known cost
    are named under the plot instead."""
    from deskbench.analysis.plotting import pyplot

    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    shown = [s for s in report.systems if s.cost_usd is not None and s.accuracy is not None]
    for s in shown:
        ax.scatter(s.cost_usd, 100 * (s.accuracy or 0.0), color="#4878a8")
        ax.annotate(s.system, (s.cost_usd or 0.0, 100 * (s.accuracy or 0.0)), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    costs = [s.cost_usd for s in shown if s.cost_usd is not None]
    if costs and min(costs) > 0 and max(costs) / min(costs) > 10:
        ax.set_xscale("log")
    ax.set_xlabel(f"total cost (USD, prices as of {report.prices_as_of})")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy and cost (Fig. 7)")
    left_out = [f"{s.system} ({_why_not_shown(s)})" for s in report.systems if s not in shown]
    if left_out:
        fig.text(0.01, 0.01, "not plotted, cost not known: " + ", ".join(left_out), fontsize=8, color="#555")
    fig.tight_layout(rect=(0, 0.05 if left_out else 0, 1, 1))
    return fig
