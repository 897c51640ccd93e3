"""The MADQA appendix sections of docqa's report section: the `deskbench analyse` effort, failures,
trajectories, cost, human-time and corpus-stats analyses over the report's own scored systems (with
the report's judge, when one was given), and their figures as PNG bytes. A section whose data the
runs cannot support says so per system ("not computable: ..."); the human-time section appears
only with people among the systems, the corpus section only with a corpus."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.tracks.docqa.analysis.corpus_stats import CorpusStats
from deskbench.tracks.docqa.analysis.cost import CostReport
from deskbench.tracks.docqa.analysis.effort import MEASURES, EffortReport
from deskbench.tracks.docqa.analysis.failures import FailuresReport
from deskbench.tracks.docqa.analysis.human_time import HumanTimeReport
from deskbench.tracks.docqa.analysis.scored import ScoredSystem
from deskbench.tracks.docqa.analysis.trajectories import TrajectoryReport


class MadqaAnalyses(BaseModel):
    effort: EffortReport
    failures: FailuresReport
    trajectories: TrajectoryReport
    cost: CostReport
    human_time: HumanTimeReport  # no systems: no people in the runs
    corpus: CorpusStats | None = None  # only with a corpus

    @property
    def measure_titles(self) -> dict[str, str]:
        return {k: m.title for k, m in MEASURES.items()}


def build_madqa(systems: Sequence[ScoredSystem], corpus: Path | None = None) -> MadqaAnalyses:
    from deskbench.tracks.docqa.analysis.corpus_stats import corpus_stats, page_counts
    from deskbench.tracks.docqa.analysis.cost import cost_report
    from deskbench.tracks.docqa.analysis.effort import effort_report
    from deskbench.tracks.docqa.analysis.failures import failures_report
    from deskbench.tracks.docqa.analysis.human_time import human_time_report
    from deskbench.tracks.docqa.analysis.trajectories import trajectory_report

    stats = None
    if corpus is not None:
        tasks = list({t.id: t for s in systems for t in s.tasks}.values())
        stats = corpus_stats(tasks, page_counts(corpus))
    return MadqaAnalyses(effort=effort_report(systems), failures=failures_report(systems),
                         trajectories=trajectory_report(systems), cost=cost_report(systems),
                         human_time=human_time_report(systems), corpus=stats)


def madqa_pngs(m: MadqaAnalyses) -> dict[str, bytes]:
    """The figures the data supports, by name (see the template for where each goes)."""
    from deskbench.report.plots import png as _png
    from deskbench.tracks.docqa.analysis.corpus_stats import corpus_figure
    from deskbench.tracks.docqa.analysis.cost import cost_figure
    from deskbench.tracks.docqa.analysis.effort import effort_figure
    from deskbench.tracks.docqa.analysis.failures import failures_figure
    from deskbench.tracks.docqa.analysis.human_time import human_time_figure
    from deskbench.tracks.docqa.analysis.trajectories import trajectories_figure

    out = {"failures": _png(failures_figure(m.failures))}
    if any(k.kuiper is not None for s in m.effort.systems for k in s.kuiper):
        out["effort"] = _png(effort_figure(m.effort))
    if any(s.reason is None for s in m.trajectories.systems):
        out["trajectories"] = _png(trajectories_figure(m.trajectories))
    if any(s.cost_usd is not None and s.accuracy is not None for s in m.cost.systems):
        out["cost"] = _png(cost_figure(m.cost))
    if any(s.reason is None for s in m.human_time.systems):
        out["human_time"] = _png(human_time_figure(m.human_time))
    if m.corpus is not None:
        out["corpus"] = _png(corpus_figure(m.corpus))
    return out
