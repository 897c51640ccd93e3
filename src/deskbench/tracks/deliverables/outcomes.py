"""Deliverables' item outcome, on its own scorer (tracks/deliverables/scoring/deliverables_run.py
`score_run`, verifiers plus the run's final rubric grades; tracks/deliverables/scoring/vrs.py):
score = VRS_0 / 100 (Eq. 1, relaxed: continuous, so a paired difference sees a criterion move from 1
to 2; the strict variant's auto-reject cliff is what ACCEPT already encodes as binary); correct =
ACCEPT (Eq. 3). Unscored when ungraded; with `reviewed_only`, also when the grade is not QC-reviewed
(as `deskbench score --reviewed-only`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions

if TYPE_CHECKING:
    from deskbench.runs.store import RunStore
    from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore

DEFINITION = ("score = VRS_0 / 100 (Eq. 1, relaxed); correct = ACCEPT (Eq. 3); ungraded items (and, with "
              "--reviewed-only, grades QC has not reviewed) are unscored")
"""How an item's score and binary outcome are defined, in words (`compare` and its page show it)."""


def deliverables_outcomes(items: Sequence[DeliverableItemScore], *, reviewed_only: bool = False) -> list[ItemOutcome]:
    out = []
    for i in items:
        counted = i.graded and i.vrs_relaxed is not None and i.accept is not None
        if reviewed_only and i.grade_status != "reviewed":
            counted = False
        if not counted:
            out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="unscored"))
            continue
        out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="scored",
                               score=float(i.vrs_relaxed) / 100.0, correct=bool(i.accept)))  # type: ignore[arg-type]
    return out


def deliverables_run_outcomes(store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run

    items = asyncio.run(score_run(store, systems=[system], judge_model=options.deliverables_judge,
                                  concurrency=options.concurrency))
    return deliverables_outcomes(items, reviewed_only=options.reviewed_only)
