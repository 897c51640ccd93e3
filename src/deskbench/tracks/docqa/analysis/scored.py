"""Scored systems: what the MADQA appendix analyses (effort, failures, trajectories, cost, human
time) read. One system of one run with its per-item scores, the tasks it was scored on and its
attempt-0 episodes, built either here from run directories (as `deskbench score` scores: ANLS*, or
the --judge with the runs' stored verdicts, analysis/judged.py) or by the report from its own scoring (then with the judge, when one was given)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.errors import UserError
from deskbench.paths import require_run
from deskbench.runs.store import Episode
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, ItemScore

if TYPE_CHECKING:
    from deskbench.tracks.docqa.analysis.judged import Judging

CORRECT_AT = 0.5  # accuracy >= 0.5 is correct (MADQA H.3 and F.3: the judge's partial counts)


@dataclass(frozen=True)
class ScoredSystem:
    label: str  # the system name; `<run dir name>/<system>` when two runs hold the same name
    tasks: list[DocQATask]  # the tasks it was scored on (a person: the ones they answered)
    items: list[ItemScore]  # one per task, in task order
    episodes: dict[str, Episode] = field(default_factory=dict)  # task id -> its attempt-0 episode
    name: str = ""  # the system's name in its run (default: the label)
    run_task_ids: tuple[str, ...] = ()  # every task of its run, in the run's order

    @property
    def system(self) -> str:
        return self.name or self.label

    def answer(self, task_id: str) -> list[str] | None:
        """The submitted answer; None when the episode has no submission (an error, a limit)."""
        ep = self.episodes.get(task_id)
        if ep is None or ep.status != "ok" or not isinstance(ep.submission, DocQASubmission):
            return None
        return list(ep.submission.answer)


def is_correct(item: ItemScore) -> bool:
    return item.accuracy is not None and item.accuracy >= CORRECT_AT


def accuracy(items: Sequence[ItemScore]) -> float | None:
    """Mean accuracy over the items with one (missing answers count 0; unscored are left out),
    as the leaderboard computes it; None without any."""
    scored = [i.accuracy for i in items if i.accuracy is not None]
    return sum(scored) / len(scored) if scored else None


def episode_seconds(ep: Episode) -> float | None:
    """Wall-clock seconds of an episode (start to end: for a person, opening the question to
    submitting); None when the times are missing or equal (nothing was timed)."""
    try:
        seconds = (datetime.fromisoformat(ep.finished_at) - datetime.fromisoformat(ep.started_at)).total_seconds()
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def first_attempts(episodes: Sequence[Episode]) -> dict[str, Episode]:
    return {ep.task_id: ep for ep in episodes if ep.attempt == 0}


def load_scored(run_dirs: Sequence[Path], pool_humans: bool = False,
                judging: Judging | None = None) -> list[ScoredSystem]:
    """Every docqa system of every run, scored with default options (ANLS*; missing answers 0),
    or with `judging`'s judge (analysis/judged.py: the runs' stored verdicts reused).

    A system that appears in several runs is labelled `<run dir name>/<system>` so rows stay
    distinct; a system made by `deskbench import` is labelled `<system> (imported)`."""
    from deskbench.runs.imported import imported_label, imported_systems
    from deskbench.runs.store import RunStore
    from deskbench.tracks.docqa.analysis.judged import Judging
    from deskbench.tracks.docqa.episodes import run_submissions
    from deskbench.tracks.docqa.humans import episodes_of, pooled_systems, tasks_scored

    judging = judging or Judging()
    if not run_dirs:
        raise UserError("no run directories given; pass one or more --out directories of 'deskbench run'")
    rows: list[tuple[Path, str, list[DocQATask], list[ItemScore], dict[str, Episode], tuple[str, ...], bool]] = []
    for run_dir in dict.fromkeys(run_dirs):
        require_run(run_dir)  # a typo names the runs nearby
        store = RunStore(run_dir, create=False)
        try:
            tasks = store.tasks_of(DocQATask)
            systems = pooled_systems(store.systems()) if pool_humans else store.systems()
            if not systems:
                raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
            ids, imported = tuple(t.id for t in tasks), set(imported_systems(store))
            for name in systems:
                subs, failed = run_submissions(store, name)
                answered = {s.id for s in subs if s.id is not None} | set(failed)
                scored_tasks = tasks_scored(name, tasks, answered)
                items = judging.score(store, name, scored_tasks, subs)
                rows.append((run_dir, name, scored_tasks, items, first_attempts(episodes_of(store, name)), ids,
                             name in imported))
        finally:
            store.close()
    names = [name for _, name, *_ in rows]
    labels = [f"{d.name}/{n}" if names.count(n) > 1 else n for d, n, *_ in rows]
    labels = [imported_label(label) if row[-1] else label for row, label in zip(rows, labels, strict=True)]
    if len(set(labels)) != len(labels):
        raise UserError("two runs with the same directory name hold the same system; rename one directory")
    return [ScoredSystem(label, tasks, items, eps, name, ids)
            for label, (_, name, tasks, items, eps, ids, _) in zip(labels, rows, strict=True)]
