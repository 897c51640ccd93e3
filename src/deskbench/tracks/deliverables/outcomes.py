"""Deliverables' item outcome, on its own scorer (tracks/deliverables/scoring/deliverables_run.py
`score_run`, verifiers plus the run's final rubric grades; tracks/deliverables/scoring/vrs.py):
score = VRS_0 / 100 (Eq. 1, relaxed: continuous, so a paired difference sees a criterion move from 1
to 2; the strict variant's auto-reject cliff is what ACCEPT already encodes as binary); correct =
ACCEPT (Eq. 3). Unscored when ungraded; with `reviewed_only`, also when the grade is not QC-reviewed
(as `deskbench score --reviewed-only`). An item's answer, for the consistency across attempts, is
its verifiers' outcomes (each verifier's id and pass / fail / unobservable).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest

if TYPE_CHECKING:
    from deskbench.models.types import ChatModel
    from deskbench.runs.store import RunStore
    from deskbench.scoring.attempts import AttemptMetrics
    from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore

DEFINITION = ("score = VRS_0 / 100 (Eq. 1, relaxed); correct = ACCEPT (Eq. 3); ungraded items (and, with "
              "--reviewed-only, grades QC has not reviewed) are unscored")
"""How an item's score and binary outcome are defined, in words (`compare` and its page show it)."""


def deliverables_outcomes(items: Sequence[DeliverableItemScore], *, reviewed_only: bool = False) -> list[ItemOutcome]:
    out = []
    for i in items:
        relaxed, accept = i.vrs_relaxed, i.accept
        if not i.graded or relaxed is None or accept is None or (reviewed_only and i.grade_status != "reviewed"):
            out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="unscored",
                                   answer=verifier_key(i)))
            continue
        out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="scored",
                               score=float(relaxed) / 100.0, correct=bool(accept), answer=verifier_key(i)))
    return out


def verifier_key(item: DeliverableItemScore) -> str:
    """The verifiers' outcomes of an item as one string: two attempts agree when every verifier
    decided the same (the deliverable's checkable facts), whatever their prose."""
    return "; ".join(f"{v.id}={v.status}" for v in sorted(item.verifiers, key=lambda v: v.id))


def deliverables_attempts(items: Sequence[DeliverableItemScore], *,
                          reviewed_only: bool = False) -> dict[str, AttemptMetrics]:
    """Per system run with --attempts K > 1: pass@k and avg@k of VRS_0 / 100, pass^k with ACCEPT
    the success (scoring/attempts.py), over the outcomes above (ungraded attempts left out)."""
    from deskbench.scoring.attempts import Attempt, attempt_metrics

    by_system: dict[str, list[ItemOutcome]] = {}
    for o in deliverables_outcomes(items, reviewed_only=reviewed_only):
        by_system.setdefault(o.system, []).append(o)
    out = {}
    for system, outcomes in by_system.items():
        k = max(o.attempt for o in outcomes) + 1
        if k > 1:
            out[system] = attempt_metrics([Attempt(o.task_id, o.attempt, o.score, o.correct, o.answer)
                                           for o in outcomes], k)
    return out


def deliverables_run_outcomes(store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run

    scorer = options.scorer if isinstance(options.scorer, DeliverablesScorer) else DeliverablesScorer()
    items = asyncio.run(score_run(store, systems=[system], judge_model=scorer.judge, concurrency=options.concurrency))
    return deliverables_outcomes(items, reviewed_only=scorer.reviewed_only)


@dataclass
class DeliverablesScorer:
    """What deliverables' outcomes take: the `llm_check` verifiers' model, and whether only
    QC-reviewed rubric grades count."""

    judge: ChatModel | None = None
    reviewed_only: bool = False


@contextmanager
def deliverables_scorer_options(request: ScorerRequest) -> Iterator[OutcomeOptions]:
    """deliverables' scorer from a command's flags (`--judge`, `--reviewed-only`); the model is closed on exit."""
    from deskbench.scoring.judges import close_models, open_judge
    from deskbench.tracks.deliverables.options import DeliverablesScoreOptions

    reviewed_only = request.options_as(DeliverablesScoreOptions).reviewed_only
    model = open_judge(request.judge, request.concurrency)
    try:
        yield OutcomeOptions(scorer=DeliverablesScorer(model, reviewed_only), concurrency=request.concurrency)
    finally:
        close_models(model)
