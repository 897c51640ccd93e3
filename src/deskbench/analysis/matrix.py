"""Run directories -> response matrix (systems x items) for item analysis.

Each system of each run is scored as `deskbench score` scores a run (default options: ANLS*,
missing answers count 0). Items are the tasks common to every run, in the first run's order, so
the columns mean the same question for every row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from deskbench.errors import UserError


@dataclass(frozen=True)
class ResponseMatrix:
    """Accuracy per (system, item): 1 / 0.5 / 0, NaN when unscored (e.g. a failed judge call)."""

    systems: list[str]
    items: list[str]
    values: npt.NDArray[np.float64]


def load_matrix(run_dirs: Sequence[Path], pool_humans: bool = False) -> ResponseMatrix:
    """Score every system of every run and keep the items common to all runs; with
    `pool_humans`, the annotators make one `human` row (runs/humans.py: earliest answer wins).

    A system that appears in several runs is labelled `<run dir name>/<system>` so rows stay
    distinct; a system made by `deskbench import` is labelled `<system> (imported)`. Raises UserError for a path that is not a run, a run without episodes, or no
    common items.
    """
    from deskbench.runs.humans import pooled_systems, tasks_scored
    from deskbench.runs.imported import imported_label, imported_systems
    from deskbench.runs.runner import run_submissions
    from deskbench.runs.store import RunStore
    from deskbench.scoring.docqa import ScoreOptions, score_all

    if not run_dirs:
        raise UserError("no run directories given; pass one or more --out directories of 'deskbench run'")
    opts = ScoreOptions()
    rows: list[tuple[Path, str, dict[str, float]]] = []
    imported: set[tuple[Path, str]] = set()
    common: list[str] | None = None
    for run_dir in run_dirs:
        if not run_dir.is_dir():
            raise UserError(f"{run_dir} is not a directory; give the --out of a 'deskbench run'")
        store = RunStore(run_dir, create=False)
        try:
            tasks = store.tasks()
            systems = pooled_systems(store.systems()) if pool_humans else store.systems()
            if not systems:
                raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
            ids = [t.id for t in tasks]
            imported |= {(run_dir, name) for name in imported_systems(store)}
            common = ids if common is None else [i for i in common if i in set(ids)]
            for name in systems:
                subs, failed = run_submissions(store, name)
                scored, _matched = score_all(tasks_scored(name, tasks, {s.id for s in subs} | set(failed)), subs, opts)
                acc = {s.id: math.nan if s.accuracy is None else float(s.accuracy) for s in scored}
                rows.append((run_dir, name, acc))
        finally:
            store.close()
    if not common:
        raise UserError(f"the runs {', '.join(str(d) for d in run_dirs)} share no tasks; analyse runs over the same task file")
    names = [name for _, name, _ in rows]
    labels = [f"{d.name}/{n}" if names.count(n) > 1 else n for d, n, _ in rows]
    labels = [imported_label(label) if (d, n) in imported else label for (d, n, _), label in zip(rows, labels, strict=True)]
    if len(set(labels)) != len(labels):
        raise UserError("two runs with the same directory name hold the same system; rename one directory")
    values = np.array([[acc.get(i, math.nan) for i in common] for _, _, acc in rows], dtype=np.float64)
    return ResponseMatrix(systems=labels, items=list(common), values=values)

