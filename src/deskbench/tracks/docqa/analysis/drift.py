"""Query reformulation magnitude (MADQA §5, Appendix H.6): how much an agent changes its search
query from one step to the next, and whether aggressive reformulation goes with correct answers.

Mean drift per step of a trajectory with k >= 2 queries is (1/(k-1)) * sum(1 - cos(q_i, q_i+1)).
Episodes with fewer than two queries never reformulated: they are counted, not averaged.
The paper embeds the queries with Snowflake Arctic Embed; the CLI uses it when it is installed,
else TF-IDF, named in the report (embedding_choice.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import median

import numpy as np
from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.analysis.embedding_choice import (
    EmbeddingChoice,
    EmbeddingUsed,
    choose_embedding,
)
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.textsim import (
    Embedder,
    correlation_p,
    cosine_distance,
    pearson_r,
    tfidf_matrix,
)
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

SEARCH_TOOL = "search_documents"


class EpisodeDrift(BaseModel):
    task_id: str
    queries: list[str]
    steps: list[float]  # 1 - cos between consecutive queries
    mean_drift: float | None  # None with fewer than two queries
    accuracy: float | None  # None when unscored or the episode failed


class SystemDrift(BaseModel):
    system: str
    run: str
    episodes: int
    reformulated: int  # episodes with two or more queries (the ones with a drift)
    mean_drift: float | None
    median_drift: float | None
    mean_drift_correct: float | None  # over reformulated episodes with accuracy >= 0.5
    mean_drift_incorrect: float | None
    point_biserial_r: float | None  # drift vs correct (0/1), reformulated episodes
    point_biserial_p: float | None
    accuracy_reformulated: float | None
    accuracy_single_query: float | None  # episodes with at most one query
    per_episode: list[EpisodeDrift]


class DriftReport(BaseModel):
    method: str  # "tfidf" or the embedder's name
    systems: list[SystemDrift]
    # Figure 25 (right): per-system mean drift vs accuracy on reformulated questions.
    system_level_r: float | None
    scoring: AnalysisScoring | None = None  # what decided correctness (set by load_drift)
    embedding: EmbeddingUsed | None = None  # what embedded the queries, a fallback named (set by load_drift)


def episode_queries(episode: Episode) -> list[str]:
    """The search queries of an episode in order: the trajectory's search tool calls, else the
    submission's search_history (imported predictions have no trajectory)."""
    queries = [
        str(step.arguments["query"])
        for step in episode.trajectory
        if isinstance(step, ToolCallStep) and step.name == SEARCH_TOOL and "query" in step.arguments
    ]
    sub = episode.submission
    if not queries and isinstance(sub, DocQASubmission) and sub.search_history:
        queries = list(sub.search_history)
    return queries


def step_drifts(vectors: np.ndarray) -> list[float]:
    """1 - cos between each pair of consecutive rows."""
    return [cosine_distance(vectors[i], vectors[i + 1]) for i in range(len(vectors) - 1)]


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def is_correct(accuracy: float) -> bool:
    """Correct means at least half credit (ANLS*-based accuracy is 0 or 1; a judge may give 0.5:
    MADQA H.3's "a score >= 0.5 counts as correct")."""
    return accuracy >= 0.5


def system_drift(
    system: str, run: str, episodes: Sequence[tuple[str, list[str]]], vectors: Sequence[np.ndarray],
    accuracy: Mapping[str, float | None],
) -> SystemDrift:
    """Summarise one system: `episodes` are (task_id, queries) and `vectors` their query rows."""
    per: list[EpisodeDrift] = []
    for (task_id, queries), vecs in zip(episodes, vectors, strict=True):
        steps = step_drifts(vecs)
        per.append(EpisodeDrift(task_id=task_id, queries=queries, steps=steps, mean_drift=_mean(steps),
                                accuracy=accuracy.get(task_id)))
    drifts = [e.mean_drift for e in per if e.mean_drift is not None]
    scored = [(e.mean_drift, e.accuracy) for e in per if e.mean_drift is not None and e.accuracy is not None]
    correct = [d for d, a in scored if is_correct(a)]
    incorrect = [d for d, a in scored if not is_correct(a)]
    r = pearson_r([d for d, _ in scored], [1.0 if is_correct(a) else 0.0 for _, a in scored])
    single = [e.accuracy for e in per if e.mean_drift is None and e.accuracy is not None]
    return SystemDrift(
        system=system, run=run, episodes=len(per), reformulated=len(drifts),
        mean_drift=_mean(drifts), median_drift=float(median(drifts)) if drifts else None,
        mean_drift_correct=_mean(correct), mean_drift_incorrect=_mean(incorrect),
        point_biserial_r=r, point_biserial_p=correlation_p(r, len(scored)),
        accuracy_reformulated=_mean([a for _, a in scored]), accuracy_single_query=_mean(single),
        per_episode=per,
    )


def drift_report(
    systems: Sequence[tuple[str, str, Sequence[tuple[str, list[str]]], Mapping[str, float | None]]],
    embed: Embedder | None = None, method: str = "tfidf",
) -> DriftReport:
    """Drift of several systems: each is (system, run, [(task_id, queries)], {task_id: accuracy}).
    TF-IDF is fitted once over every query of every system, so their drifts share one scale."""
    all_queries = [q for _, _, eps, _ in systems for _, qs in eps for q in qs]
    matrix = (embed or tfidf_matrix)(all_queries) if all_queries else np.zeros((0, 0))
    out: list[SystemDrift] = []
    row = 0
    for system, run, eps, acc in systems:
        vecs = []
        for _, qs in eps:
            vecs.append(matrix[row:row + len(qs)])
            row += len(qs)
        out.append(system_drift(system, run, eps, vecs, acc))
    pairs = [(s.mean_drift, s.accuracy_reformulated) for s in out
             if s.mean_drift is not None and s.accuracy_reformulated is not None]
    return DriftReport(method=method, systems=out,
                       system_level_r=pearson_r([d for d, _ in pairs], [a for _, a in pairs]))


def run_accuracies(store: RunStore, system: str, judging: Judging | None = None) -> dict[str, float | None]:
    """Per-task accuracy of one system of a run (scored as `deskbench score` does: ANLS*, or
    `judging`'s judge with the run's stored verdicts)."""
    from deskbench.tracks.docqa.episodes import run_submissions

    subs, _failed = run_submissions(store, system)
    items = (judging or Judging()).score(store, system, store.tasks_of(DocQATask), subs)
    return {i.id: i.accuracy for i in items}


METHODS = ("tfidf", "minilm")


def method_embedder(method: str) -> Embedder | None:
    """The embedder of a method name: None for TF-IDF (the light default), the numpy MiniLM of the
    optional `embeddings` extra for "minilm" (a clear UserError when the extra is missing)."""
    if method == "tfidf":
        return None
    if method == "minilm":
        from deskbench.tracks.docqa.analysis.embeddings import load_minilm

        return load_minilm()
    raise UserError(f"--method {method!r} is not valid; use {' or '.join(METHODS)}")


def load_drift(run_dirs: Sequence[Path], method: str = "tfidf", judging: Judging | None = None,
               embedding: EmbeddingChoice | None = None) -> DriftReport:
    """Drift of every system in the given run directories, with TF-IDF or sentence embeddings
    (`embedding`, as embedding_choice.py chooses it, else `method`); correctness by ANLS* or
    `judging`'s judge."""
    judging = judging or Judging()
    if not run_dirs:
        raise UserError("give at least one run directory")
    if embedding is None:
        if method not in METHODS:
            method_embedder(method)  # its one line for an unknown method
        embedding = choose_embedding(method)  # before reading runs: a missing extra fails fast
    embed, method = embedding.embedder("query"), embedding.method
    systems = []
    for run_dir in run_dirs:
        store = RunStore(run_dir, create=False)
        if not store.systems():
            raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
        for system in store.systems():
            eps = [(e.task_id, episode_queries(e)) for e in store.episodes(system)]
            systems.append((system, str(run_dir), eps, run_accuracies(store, system, judging)))
        store.close()
    report = drift_report(systems, embed=embed, method=method)
    report.scoring = judging.summary()
    report.embedding = embedding.used
    return report


def plot_drift(report: DriftReport, path: Path) -> None:
    """Figure 24: the distribution of mean drift per episode by system, sorted by median."""
    from deskbench.analysis.plotting import pyplot, save_figure

    plt = pyplot()
    rows = [(s, [e.mean_drift for e in s.per_episode if e.mean_drift is not None]) for s in report.systems]
    rows = [(s, d) for s, d in rows if d]
    if not rows:
        raise UserError("no episode has two or more search queries: there is no drift to plot")
    rows.sort(key=lambda sd: float(median(sd[1])))
    several_runs = len({s.run for s in report.systems}) > 1
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(rows) + 1.5))
    ax.boxplot([d for _, d in rows], orientation="horizontal")
    ax.set_yticks(range(1, len(rows) + 1), [f"{s.system} ({Path(s.run).name})" if several_runs else s.system for s, _ in rows])
    ax.set_xlabel(f"mean drift per step (1 - cosine, {report.method})")
    ax.set_title("Query reformulation magnitude")
    fig.tight_layout()
    save_figure(fig, path)
