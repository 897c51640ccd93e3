"""Retrieval metrics of every search an episode made, against the task's gold evidence pages.

These are deskbench's diagnostics, not MADQA metrics: the paper scores only the final citations
(Page F1, Doc F1) and lists "recall@k ... MRR/NDCG based on retrieval logs" among the choices it
did not take (Table 5). They say whether an agent's searches ever put the evidence in front of
it, which tells a retrieval failure from a reading failure.

A search is a trajectory step whose arguments hold a `query` and whose result lists the pages it
returned, best first (deskbench's agents, an MCP agent's `search_documents`, an imported
official trajectory's search results). A search whose pages are not known (an imported
`search_history` of bare queries) is counted, not scored. For each scored search:

- evidence recall@k: the share of the task's gold pages among the first k pages returned;
- reciprocal rank: 1 / the rank of the first gold page returned, 0 when none is.

Per system both are averaged over searches (each search counts once; an episode of ten searches
weighs ten times one of one), and `evidence_reached` is the share of episodes whose searches
together returned every gold page. Tasks without gold evidence and episodes without a scored
search are left out and counted. Overall and by hop type (single, cross-page, cross-document).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from deskbench.tasks.trajectory import ToolCallStep, TrajectoryStep
from deskbench.tracks.docqa.imported import trajectory_of
from deskbench.tracks.docqa.tasks import HOP_TYPES, DocQASubmission, DocQATask

K = (1, 5, 10)
"""The cut-offs of evidence recall@k: 1 says whether the best page is gold, 5 and 10 are the common
retrieval cut-offs. MADQA's BM25 agent is shown 3 pages a search by default (4 in
process_dataset.py, which made the leaderboard's files), so for its searches recall@5 and @10 are
the recall of everything a search returned."""

Page = tuple[str, int]


class RetrievalGroup(BaseModel):
    """The searches of one set of episodes. None where nothing was scored."""

    episodes: int  # episodes with gold evidence and at least one scored search
    searches: int  # scored searches
    recall_at: dict[int, float | None] = Field(default_factory=dict)  # k -> mean evidence recall@k
    mrr: float | None = None  # mean reciprocal rank of the first gold page
    evidence_reached: float | None = None  # share of episodes whose searches returned every gold page


class RetrievalReport(BaseModel):
    k: list[int] = Field(default_factory=lambda: list(K))
    overall: RetrievalGroup
    by_hop_type: dict[str, RetrievalGroup]
    episodes_without_search: int = 0  # with gold evidence, but no search whose pages are known
    searches_without_pages: int = 0  # searches whose returned pages are not known (not scored)
    tasks_without_evidence: int = 0  # answered tasks with no gold pages: nothing to score against


def search_results(steps: Iterable[TrajectoryStep]) -> tuple[list[list[Page]], int]:
    """The pages each search returned, best first, and how many searches returned no known pages."""
    found: list[list[Page]] = []
    unknown = 0
    for step in steps:
        if not isinstance(step, ToolCallStep) or "query" not in step.arguments:
            continue
        pages = step.result.get("pages")
        if not isinstance(pages, list):
            unknown += 1
            continue
        found.append([p for ref in pages if (p := page_of(ref)) is not None])
    return found, unknown


def page_of(ref: Any) -> Page | None:
    """A returned page as a trajectory step records it ([document, page], or {"document"|"file",
    "page"}); None for anything else."""
    if isinstance(ref, list | tuple) and len(ref) == 2:
        doc, page = ref
    elif isinstance(ref, dict):
        doc, page = ref.get("document", ref.get("file")), ref.get("page")
    else:
        return None
    try:
        return (str(doc), int(page))
    except (TypeError, ValueError):
        return None


def recall_at(returned: Sequence[Page], gold: set[Page], k: int) -> float:
    return len(set(returned[:k]) & gold) / len(gold)


def reciprocal_rank(returned: Sequence[Page], gold: set[Page]) -> float:
    for rank, page in enumerate(returned, start=1):
        if page in gold:
            return 1.0 / rank
    return 0.0


class Tally:
    """Searches against gold pages, tallied for one group (an episode's searches added at once)."""

    def __init__(self) -> None:
        self.episodes = 0
        self.reached = 0
        self.recall: dict[int, list[float]] = {k: [] for k in K}
        self.rr: list[float] = []

    def add(self, searches: list[list[Page]], gold: set[Page]) -> None:
        self.episodes += 1
        self.reached += gold <= {p for returned in searches for p in returned}
        for returned in searches:
            for k in K:
                self.recall[k].append(recall_at(returned, gold, k))
            self.rr.append(reciprocal_rank(returned, gold))

    def group(self) -> RetrievalGroup:
        def mean(xs: list[float]) -> float | None:
            return sum(xs) / len(xs) if xs else None

        return RetrievalGroup(episodes=self.episodes, searches=len(self.rr),
                              recall_at={k: mean(v) for k, v in self.recall.items()}, mrr=mean(self.rr),
                              evidence_reached=self.reached / self.episodes if self.episodes else None)


def retrieval_report(pairs: Iterable[tuple[DocQATask, DocQASubmission | None]],
                     trajectories: Mapping[str, Sequence[TrajectoryStep]] | None = None) -> RetrievalReport | None:
    """The retrieval metrics of the answered tasks' searches; None when no submission made a search
    (a one-shot system, a predictions file without search logs): there is nothing to report.
    `trajectories`: a run's episodes' steps by task id (a stored episode keeps its trajectory
    beside its submission); else each submission's own (a predictions file's)."""
    overall, by_hop = Tally(), {hop: Tally() for hop in HOP_TYPES}
    without_search = without_pages = without_evidence = 0
    any_search = False
    for task, sub in pairs:
        if sub is None:
            continue
        steps = trajectory_of(sub) if trajectories is None else trajectories.get(task.id, ())
        searches, unknown = search_results(steps)
        any_search = any_search or bool(searches) or unknown > 0
        without_pages += unknown
        gold = {(e.document, e.page) for e in task.evidence}
        if not gold:
            without_evidence += 1
            continue
        if not searches:
            without_search += 1
            continue
        overall.add(searches, gold)
        by_hop[task.hop_type].add(searches, gold)
    if not any_search:
        return None
    return RetrievalReport(overall=overall.group(), by_hop_type={h: t.group() for h, t in by_hop.items()},
                           episodes_without_search=without_search, searches_without_pages=without_pages,
                           tasks_without_evidence=without_evidence)


def episode_retrieval(steps: Iterable[TrajectoryStep], gold: set[Page]) -> dict[str, Any]:
    """One episode's searches as the viewer shows them (figures as above, over its searches);
    nothing when it made no scored search or its task has no gold pages."""
    searches, _ = search_results(steps)
    if not searches or not gold:
        return {}
    tally = Tally()
    tally.add(searches, gold)
    g = tally.group()
    return {"searches scored": g.searches, **{f"evidence recall@{k}": round(v, 4) for k, v in g.recall_at.items()
                                              if v is not None},
            "MRR": round(g.mrr or 0.0, 4), "every gold page returned": bool(g.evidence_reached)}

