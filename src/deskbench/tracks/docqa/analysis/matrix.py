"""Run directories -> response matrix (systems x items) for item analysis.

Each system of each run is scored as `deskbench score` scores a run (default options: ANLS*,
missing answers count 0; with a judge, as MADQA H.3, analysis/judged.py). Items are the tasks common to every run, in the first run's order, so
the columns mean the same question for every row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.tracks.docqa.analysis.judged import Judging


@dataclass(frozen=True)
class ResponseMatrix:
    """Accuracy per (system, item): 1 / 0.5 / 0, NaN when unscored (e.g. a failed judge call)."""

    systems: list[str]
    items: list[str]
    values: npt.NDArray[np.float64]


def load_matrix(run_dirs: Sequence[Path], pool_humans: bool = False, judging: Judging | None = None) -> ResponseMatrix:
    """Score every system of every run and keep the items common to all runs; with
    `pool_humans`, the annotators make one `human` row (tracks/docqa/humans.py: earliest answer wins).

    A system that appears in several runs is labelled `<run dir name>/<system>` so rows stay
    distinct; a system made by `deskbench import` is labelled `<system> (imported)`. Raises UserError for a path that is not a run, a run without episodes, or no
    common items.
    """
    from deskbench.tracks.docqa.analysis.scored import load_scored

    systems = load_scored(run_dirs, pool_humans, judging)
    common: list[str] | None = None
    for system in systems:
        ids = set(system.run_task_ids)
        common = list(system.run_task_ids) if common is None else [i for i in common if i in ids]
    if not common:
        raise UserError(f"the runs {', '.join(str(d) for d in run_dirs)} share no tasks; analyse runs over the same task file")
    rows = [{i.id: math.nan if i.accuracy is None else float(i.accuracy) for i in s.items} for s in systems]
    values = np.array([[acc.get(i, math.nan) for i in common] for acc in rows], dtype=np.float64)
    return ResponseMatrix(systems=[s.label for s in systems], items=list(common), values=values)
