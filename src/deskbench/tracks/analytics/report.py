"""analytics' section of `deskbench report` (`Track.report_section`): AIDABench's metrics for every
system of its runs (pass@1, pass@k, avg@k by category and difficulty, bad cases, the summary
ablation, Appendix H's tokens and rounds per task type), scored with the report's judges (the numbers `deskbench score` prints), and its figures;
its template is report.html.j2 beside this module."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from deskbench.analysis.plotting import pyplot
from deskbench.report.comparisons import by_system, compare_several, lone_reliability
from deskbench.report.models import ReportSection, SectionData
from deskbench.report.plots import png as _png
from deskbench.report.sections import judge_settings
from deskbench.runs.outcomes import OutcomeOptions
from deskbench.runs.protocol import system_protocol
from deskbench.runs.store import RunStore
from deskbench.tracks.analytics.scoring.analytics import (
    AnalyticsItemScore,
    AnalyticsJudges,
    analytics_score_protocol,
    score_run,
)
from deskbench.tracks.analytics.scoring.analytics_metrics import (
    AnalyticsScoreReport,
    attach_summary_ablations,
    summarize_analytics,
)
from deskbench.tracks.analytics.stats import SystemEffort, by_consumption, effort_png, system_effort
from deskbench.tracks.analytics.tasks import AnalyticsTask

TEMPLATE = "deskbench.tracks.analytics:report.html.j2"


class AnalyticsSection(SectionData):
    """Every analytics system of the report's runs."""

    systems: list[AnalyticsScoreReport]  # AIDABench's metrics, one per system
    judges: str = ""  # which judges decided, in words for the page
    effort: list[SystemEffort] = []  # Appendix H, one per system (in the order of `systems`)

    def figures(self) -> dict[str, bytes]:
        figures = {"analytics_pass": analytics_pass_png(self.systems),
                   "analytics_errors": analytics_errors_png(self.systems)}
        if self.effort:
            figures["analytics_tokens"] = effort_png(self.effort, "output_tokens")
            figures["analytics_rounds"] = effort_png(self.effort, "rounds")
        return figures

    def context(self) -> dict[str, object]:
        from deskbench.tracks.analytics.scoring.analytics import ERROR_CATEGORIES

        return {"error_categories": ERROR_CATEGORIES, "analytics_titles": ANALYTICS_TITLES,
                "effort_by_tokens": by_consumption(self.effort, "output_tokens")}


def score_analytics_runs(store: RunStore, systems: Sequence[str], judges: AnalyticsJudges,
                         items_out: list[tuple[Path, list[AnalyticsItemScore]]] | None = None,
                         concurrency: int = 8,
                         effort_out: list[SystemEffort] | None = None) -> list[AnalyticsScoreReport]:
    """AIDABench's metrics for every system of an analytics run (k = the most attempts stored);
    `items_out` receives each system's scored items (the report's Comparison section), `effort_out`
    each system's Appendix H numbers; judge calls `concurrency` at a time."""
    tasks = store.tasks_of(AnalyticsTask)
    task_ids = [t.id for t in tasks]
    scoring = analytics_score_protocol(judges, tasks)
    out = []
    for name in systems:
        items = asyncio.run(score_run(store, name, judges, concurrency=concurrency))
        if items_out is not None:
            items_out.append((store.dir, items))
        k = max([it.attempt + 1 for it in items], default=1)
        out.append(summarize_analytics(items, system=f"{name} ({store.dir.name})", k=k, task_ids=task_ids,
                                       protocol=system_protocol(store, name, scoring)))
        if effort_out is not None:
            effort_out.append(system_effort(items, system=f"{name} ({store.dir.name})", k=k))
    attach_summary_ablations(out)  # Table 2: a [no-summary] system beside its twin of the same run
    return out


def analytics_method(judges: AnalyticsJudges) -> str:
    qa = (f"every answer goes to the binary judge {judges.qa.id} (Listing 2)" if judges.qa else
          "no judge: deskbench's deterministic check of the final value (answers it cannot decide are unscored)")
    chart = (f"the vision judge {judges.chart.id} (Listings 3 and 4, S = 0.7 C + 0.3 R)" if judges.chart
             else "no vision judge (charts are unscored; the missing-glyph check still runs)")
    if judges.file is not None and judges.file_all:
        files = (f"every file goes to the agentic File Judge {judges.file.model.id} (Listing 5, at most "
                 f"{judges.file.max_calls} sandboxed execute_code calls)")
    elif judges.file is not None:
        files = (f"deskbench's three-stage comparator; files it cannot read go to the File Judge "
                 f"{judges.file.model.id} (Listing 5)")
    else:
        files = "deskbench's three-stage spreadsheet comparator (structure, normalised content, instruction constraints)"
    return f"QA: {qa}. Charts: {chart}. Files: {files}. Each system's protocol is listed below its tables."


def analytics_report_section(stores: Sequence[RunStore], options: OutcomeOptions,
                             params: Mapping[str, object]) -> ReportSection:
    """Every system of every analytics run, scored with the judges in `options` (none: the
    deterministic fallbacks, said so in the protocol)."""
    from deskbench.tracks.analytics.outcomes import DEFINITION, analytics_outcomes

    judges = options.scorer if isinstance(options.scorer, AnalyticsJudges) else AnalyticsJudges()
    items: list[tuple[Path, list[AnalyticsItemScore]]] = []
    reports: list[AnalyticsScoreReport] = []
    effort: list[SystemEffort] = []
    for store in stores:
        reports += score_analytics_runs(store, store.systems(), judges, items, concurrency=options.concurrency,
                                        effort_out=effort)
    systems = by_system([(d, analytics_outcomes(scored)) for d, scored in items])
    return ReportSection(
        track="analytics", title="analytics (AIDABench)", template=TEMPLATE,
        data=AnalyticsSection(systems=reports, judges=analytics_method(judges), effort=effort),
        n_systems=len(reports), summary=f"{len(reports)} analytics system(s).",
        comparisons=compare_several("analytics", DEFINITION, systems), reliability=lone_reliability(systems),
        model_settings=judge_settings([("QA judge", judges.qa), ("chart judge", judges.chart),
                                       ("file judge", judges.file.model if judges.file else None)]))


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
