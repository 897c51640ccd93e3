"""Search trajectories (MADQA Appendix H.5, Figures 22 and 23).

A search iteration is a tool call of the episode whose result lists pages ({"pages": [[doc,
page], ...]}: the BM25 agent's, the single-call baselines' and a person's searches alike; a
search that failed still counts as an iteration, with no pages). Only pages in search results
count as seen (a page a person opened from elsewhere does not).

- Figure 22, evidence found by iteration N, over every question the system was scored on that
  has gold evidence (a question whose episode made fewer than N searches keeps what it had found):
    document: share of questions where a gold document was in the results of searches 1..N;
    page:     mean over questions of the share of their gold evidence pages seen in searches
              1..N (a single-page question: found or not); `page_any` is the share of questions
              where any gold page was seen.
- Figure 23, recovery rate: of the questions whose first search did not return a gold document
  ("requiring recovery", n), the share where a later search did. Questions with no search at all
  have no first query and are in neither count.

A system none of whose trajectories holds a search result (an RLM's REPL calls, an imported
prediction file) is "not computable", never a rate of 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.runs.store import Episode
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.scored import ScoredSystem
from deskbench.tracks.docqa.scoring.retrieval import page_of
from deskbench.tracks.docqa.tasks import DocQATask

PageKey = tuple[str, int]



def searches(ep: Episode | None) -> list[set[PageKey]]:
    """The pages each search of the episode returned, in order."""
    if ep is None:
        return []
    out = []
    for step in ep.trajectory:
        if isinstance(step, ToolCallStep) and isinstance(step.result.get("pages"), list):
            out.append({p for ref in step.result["pages"] if (p := page_of(ref)) is not None})
    return out


class QuestionTrajectory(BaseModel):
    id: str
    searches: int
    doc_found_at: int | None  # first search (1-based) returning a gold document
    page_found_at: int | None  # first search returning a gold page
    page_share: list[float]  # share of gold pages seen after searches 1, 2, ... (one per search)


class SystemTrajectories(BaseModel):
    system: str
    questions: int  # questions with gold evidence the system was scored on
    reason: str | None  # "not computable: ..." (then every curve is empty and rates None)
    document: list[float]  # Figure 22 left: share found by iteration 1..N
    page: list[float]  # Figure 22 right: mean share of gold pages seen by iteration 1..N
    page_any: list[float]  # share of questions with any gold page seen by iteration 1..N
    recovery_n: int  # questions whose first search missed every gold document
    recovered: int  # ... of which a later search found one
    recovery_rate: float | None  # recovered / recovery_n; None when nothing needed recovery
    per_question: list[QuestionTrajectory]


class TrajectoryReport(BaseModel):
    iterations: list[int]  # 1..N, N the most searches any episode made
    systems: list[SystemTrajectories]
    scoring: AnalysisScoring | None = None  # what decided correctness (set by the command)


def question_trajectory(task: DocQATask, ep: Episode | None) -> QuestionTrajectory:
    gold_docs = {e.document for e in task.evidence}
    gold_pages = {(e.document, e.page) for e in task.evidence}
    seen: set[PageKey] = set()
    doc_at = page_at = None
    shares = []
    for k, pages in enumerate(searches(ep), start=1):
        seen |= pages
        if doc_at is None and any(d in gold_docs for d, _ in pages):
            doc_at = k
        if page_at is None and pages & gold_pages:
            page_at = k
        shares.append(len(seen & gold_pages) / len(gold_pages))
    return QuestionTrajectory(id=task.id, searches=len(shares), doc_found_at=doc_at, page_found_at=page_at,
                              page_share=shares)


def _at(q: QuestionTrajectory, n: int) -> float:
    """The share of gold pages seen by iteration n (the last value after the last search)."""
    return q.page_share[min(n, len(q.page_share)) - 1] if q.page_share else 0.0


def system_trajectories(system: ScoredSystem, iterations: int) -> SystemTrajectories:
    counted = {i.id for i in system.items if i.status == "missing" or i.accuracy is not None}
    tasks = [t for t in system.tasks if t.id in counted and t.evidence]
    qs = [question_trajectory(t, system.episodes.get(t.id)) for t in tasks]
    if not qs or not any(q.searches for q in qs):
        why = ("no question with gold evidence" if not qs
               else "its trajectories hold no search results (tool calls with result pages)")
        return SystemTrajectories(system=system.label, questions=len(qs), reason=f"not computable: {why}",
                                  document=[], page=[], page_any=[], recovery_n=0, recovered=0,
                                  recovery_rate=None, per_question=qs)
    n = len(qs)
    ns = range(1, iterations + 1)
    needing = [q for q in qs if q.searches and q.doc_found_at != 1]
    recovered = sum(q.doc_found_at is not None for q in needing)
    return SystemTrajectories(
        system=system.label, questions=n, reason=None,
        document=[sum(q.doc_found_at is not None and q.doc_found_at <= k for q in qs) / n for k in ns],
        page=[sum(_at(q, k) for q in qs) / n for k in ns],
        page_any=[sum(q.page_found_at is not None and q.page_found_at <= k for q in qs) / n for k in ns],
        recovery_n=len(needing), recovered=recovered, recovery_rate=recovered / len(needing) if needing else None,
        per_question=qs)


def trajectory_report(systems: Sequence[ScoredSystem]) -> TrajectoryReport:
    most = max((len(searches(ep)) for s in systems for ep in s.episodes.values()), default=0)
    iterations = max(most, 1)
    return TrajectoryReport(iterations=list(range(1, iterations + 1)),
                            systems=[system_trajectories(s, iterations) for s in systems])


def load_trajectories(run_dirs: Sequence[Path], pool_humans: bool = False,
                      judging: Judging | None = None) -> TrajectoryReport:
    from deskbench.tracks.docqa.analysis.scored import load_scored

    judging = judging or Judging()
    report = trajectory_report(load_scored(run_dirs, pool_humans, judging))
    report.scoring = judging.summary()
    return report


def trajectories_figure(report: TrajectoryReport) -> Any:
    """Figure 22 (document and page found by iteration) and Figure 23 (recovery rate, n above
    each bar); systems that are not computable are named under the plot, not drawn."""
    from matplotlib.ticker import MaxNLocator

    from deskbench.analysis.plotting import pyplot

    fig, axes = pyplot().subplots(1, 3, figsize=(14, 4.2))
    drawn = [s for s in report.systems if s.reason is None]
    for ax, attr, title in ((axes[0], "document", "gold document found"), (axes[1], "page", "gold evidence pages seen")):
        for s in drawn:
            ax.plot(report.iterations, [100 * v for v in getattr(s, attr)], marker="o", markersize=3, label=s.system)
        ax.set_ylim(0, 100)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("search iteration N")
        ax.set_ylabel("% of questions" if attr == "document" else "% of gold pages (mean over questions)")
        ax.set_title(f"Fig. 22: {title} by iteration", fontsize=10)
        if drawn:
            ax.legend(fontsize=7)
    ax = axes[2]
    bars = [s for s in drawn if s.recovery_rate is not None]
    ax.bar([s.system for s in bars], [100 * (s.recovery_rate or 0.0) for s in bars], color="#4878a8")
    for k, s in enumerate(bars):
        ax.text(k, 100 * (s.recovery_rate or 0.0) + 1, f"n={s.recovery_n}", ha="center", fontsize=8)
    ax.set_ylim(0, 110)
    ax.set_ylabel("recovered (% of first-query misses)")
    ax.set_title("Fig. 23: recovery after a first-query miss", fontsize=10)
    ax.tick_params(axis="x", labelrotation=20, labelsize=7)
    skipped = [s.system for s in report.systems if s.reason is not None]
    if skipped:
        fig.text(0.01, 0.01, "not computable (no search results): " + ", ".join(skipped), fontsize=8, color="#555")
    fig.tight_layout(rect=(0, 0.05 if skipped else 0, 1, 1))
    return fig
