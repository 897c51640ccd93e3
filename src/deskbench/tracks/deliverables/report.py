"""deliverables' section of `deskbench report` (`Track.report_section`): the consulting paper's
tables over every system of its runs side by side (VRS, ACCEPT, prompt classes, criterion zeros,
paired ACCEPT tests), scored as `deskbench score` scores them, and its figure; its template is
report.html.j2 beside this module."""

from __future__ import annotations

import asyncio
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deskbench.analysis.plotting import pyplot
from deskbench.report.comparisons import by_system, compare_several, lone_reliability
from deskbench.report.models import ReportSection, SectionData
from deskbench.report.plots import empty as _empty
from deskbench.report.plots import png as _png
from deskbench.report.sections import judge_settings
from deskbench.runs.outcomes import OutcomeOptions
from deskbench.runs.protocol import ProtocolNote, stored_protocol
from deskbench.runs.store import RunStore
from deskbench.tracks.deliverables.outcomes import DeliverablesScorer
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.scoring.deliverables_report import DeliverablesReport
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES, DeliverableTask
from deskbench.tracks.deliverables.web_deny import PeekingCounts, peeking_by_system

TEMPLATE = "deskbench.tracks.deliverables:report.html.j2"


class DeliverablesSection(SectionData):
    """The deliverables runs' systems, side by side (consulting paper)."""

    report: DeliverablesReport
    runs: list[str]  # the run directories it was computed from

    def figures(self) -> dict[str, bytes]:
        return {"deliverables_class": deliverables_class_png(self.report)} if self.report.graded else {}

    def context(self) -> dict[str, object]:
        return {"rubric_codes": RUBRIC_CODES}


@dataclass
class DeliverablesRun:
    """One deliverables run, scored (every system, attempt 0 and later)."""

    run_dir: Path
    items: list[DeliverableItemScore]
    tasks: list[DeliverableTask]
    protocol: dict[str, list[ProtocolNote]] = field(default_factory=dict)  # how each system was run
    peeking: dict[str, PeekingCounts] = field(default_factory=dict)  # denied attempts per system (web_deny.py)


def score_deliverables_run(store: RunStore, scorer: DeliverablesScorer | None = None,
                           concurrency: int = 8) -> list[DeliverableItemScore]:
    """Verifiers on every episode with the run's final rubric grades, as `deskbench score` scores
    them: without a judge in `scorer`, an `llm_check` verifier is unobservable."""
    from deskbench.tracks.deliverables.scoring.deliverables_run import (
        score_run as score_deliverables,
    )

    judge = scorer.judge if scorer is not None else None
    return asyncio.run(score_deliverables(store, systems=None, judge_model=judge, concurrency=concurrency))


def deliverables_report(runs: Sequence[DeliverablesRun], *, resamples: int = 1000, seed: int = 0,
                        reviewed_only: bool = False) -> DeliverablesReport | None:
    """The consulting paper's tables over the systems of every deliverables run, side by side
    (None without one). A system name found in several runs is suffixed with its run directory's
    name (its path when those clash too); a task id in several runs is one task."""
    from deskbench.tracks.deliverables.scoring.deliverables_summary import summarize

    if not runs:
        return None
    found = Counter(s for r in runs for s in {i.system for i in r.items})
    dir_names = Counter(r.run_dir.name for r in runs)
    items: list[DeliverableItemScore] = []
    tasks: dict[str, DeliverableTask] = {}
    run_side: dict[str, list[ProtocolNote]] = {}
    peeking: dict[str, PeekingCounts] = {}
    for r in runs:
        where = r.run_dir.name if dir_names[r.run_dir.name] == 1 else str(r.run_dir)
        label = {s: f"{s} ({where})" if n > 1 else s for s, n in found.items()}
        items += [item.model_copy(update={"system": label[item.system]}) for item in r.items]
        for task in r.tasks:
            tasks.setdefault(task.id, task)
        run_side.update({label[system]: notes for system, notes in r.protocol.items() if system in label})
        peeking.update({label[system]: counts for system, counts in r.peeking.items() if system in label})
    report = summarize(items, list(tasks.values()), resamples=resamples, seed=seed, reviewed_only=reviewed_only)
    report.run_protocol = run_side
    report.peeking = peeking
    return report


def deliverables_report_section(stores: Sequence[RunStore], options: OutcomeOptions,
                                params: Mapping[str, object]) -> ReportSection:
    """Every system of every deliverables run; `options` carries the `llm_check` verifiers' judge
    and whether only QC-reviewed rubric grades count (`--reviewed-only`)."""
    from deskbench.tracks.deliverables.outcomes import DEFINITION, deliverables_outcomes

    scorer = options.scorer if isinstance(options.scorer, DeliverablesScorer) else DeliverablesScorer()
    reviewed_only = scorer.reviewed_only or bool(params.get("reviewed_only"))
    runs = [DeliverablesRun(store.dir, score_deliverables_run(store, scorer, options.concurrency),
                            store.tasks_of(DeliverableTask), stored_protocol(store),
                            peeking_by_system(store, store.systems())) for store in stores]
    report = deliverables_report(runs, reviewed_only=reviewed_only)
    assert report is not None  # a section is asked for only with runs
    systems = by_system([(r.run_dir, deliverables_outcomes(r.items, reviewed_only=reviewed_only)) for r in runs])
    return ReportSection(
        track="deliverables", title="deliverables (consulting DRA)", template=TEMPLATE,
        data=DeliverablesSection(report=report, runs=[str(r.run_dir) for r in runs]),
        n_systems=len(report.systems), summary=f"{len(report.systems)} deliverables system(s).",
        comparisons=compare_several("deliverables", DEFINITION, systems), reliability=lone_reliability(systems),
        model_settings=judge_settings([("verifier judge (llm_check)", scorer.judge)]))


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
