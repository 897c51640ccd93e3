"""One item's outcome, the same shape for every track: the seed of the Track protocol (issue 21).

`ItemOutcome` is what a track says about one (task, attempt) of one system once scored: whether
it could be scored at all (`unscored` is kept apart from wrong: a judge that failed, a chart
without a vision judge, a deliverable nobody graded), its score in [0, 1] and a binary `correct`.
Everything that compares systems across tracks (`deskbench compare`, analysis/compare.py) reads
these and nothing track-specific.

Each track's definition lives here, in one place, on top of the track's own scorer (never a
copy of it): `OUTCOMES[track](store, system, options)` scores a system of a run and converts;
the `*_outcomes` converters also take items already scored (so a report that has scored a run
can derive the outcomes without scoring again).

- docqa (tracks/docqa/scoring/docqa.py `score_all`, as `deskbench score RUN` scores a run: attempt-0
  episodes, a failed episode scored 0): score = the item's accuracy (1/0 under ANLS* >= 0.5;
  1/0.5/0 with --judge); correct = `ItemScore.correct`, accuracy >= 0.5 (MADQA F.3's binary
  correctness, what the official Kuiper uses; a judge's "partial" counts as correct). A judge
  call that failed leaves the item unscored. Only tasks the system has an episode for are its
  tasks (a task it never ran is not wrong, it is not its task).
- analytics (tracks/analytics/scoring/analytics.py `score_run`): score = the item's score (0/1 for qa and
  files, S = 0.7 C + 0.3 R for charts); correct = score == 1 for qa and files; for charts C == 1
  (every rubric item of Listing 3 satisfied), the same line `deskbench calibrate sample` draws
  for a chart, because S mixes in readability R, which no reference decides (S >= 1 would also
  need a perfect R; S >= 0.7 would pass a chart with C = 1 and R = 0 and one with C = 0.9,
  R = 0.4 alike). Unscored when the evaluator could not decide (no judge, a failed judge call).
- deliverables (tracks/deliverables/scoring/deliverables_run.py `score_run`, verifiers plus the run's final rubric
  grades; tracks/deliverables/scoring/vrs.py): score = VRS_0 / 100 (Eq. 1, relaxed: continuous, so a paired
  difference sees a criterion move from 1 to 2; the strict variant's auto-reject cliff is what
  ACCEPT already encodes as binary); correct = ACCEPT (Eq. 3). Unscored when ungraded; with
  `reviewed_only`, also when the grade is not QC-reviewed (as `deskbench score --reviewed-only`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, model_validator

from deskbench.runs.store import RunStore

if TYPE_CHECKING:
    from deskbench.models.types import ChatModel
    from deskbench.tasks.docqa import ItemScore
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore, AnalyticsJudges
    from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
    from deskbench.tracks.docqa.scoring.docqa import ScoreOptions


class ItemOutcome(BaseModel):
    """One (task, attempt) of one system, scored: the track-independent view."""

    task_id: str
    attempt: int = 0
    system: str
    status: Literal["scored", "unscored"]
    score: float | None = Field(default=None, ge=0.0, le=1.0)  # None exactly when unscored
    correct: bool | None = None  # None exactly when unscored

    @model_validator(mode="after")
    def _unscored_has_no_score(self) -> ItemOutcome:
        present = (self.score is not None, self.correct is not None)
        if present != ((True, True) if self.status == "scored" else (False, False)):
            raise ValueError(f"{self.system} / {self.task_id}: a scored item has a score and a correct flag, "
                             "an unscored one neither")
        return self


@dataclass
class OutcomeOptions:
    """What the tracks' scorers take (the judges `deskbench score` takes), in one bundle."""

    docqa: ScoreOptions | None = None  # None: ANLS* >= 0.5, no judge
    analytics: AnalyticsJudges | None = None  # None: no judges (charts unscored)
    deliverables_judge: ChatModel | None = None  # the `llm_check` verifiers' model
    reviewed_only: bool = False  # deliverables: only QC-reviewed grades count
    concurrency: int = 8
    extra: dict[str, object] = field(default_factory=dict)  # room for a new track's options


DEFINITIONS: dict[str, str] = {  # the built-in tracks' `outcome_definition`
    "docqa": "score = the item's accuracy (ANLS* >= 0.5 gives 1/0; with --judge 1/0.5/0); correct = accuracy "
             ">= 0.5 (a judge's partial counts); a failed episode scores 0; a failed judge call is unscored",
    "analytics": "score = the evaluator's score (0/1 for qa and files, S = 0.7 C + 0.3 R for charts); correct = "
                 "score 1 for qa and files, C = 1 for charts; undecided items (no judge, a failed call) are unscored",
    "deliverables": "score = VRS_0 / 100 (Eq. 1, relaxed); correct = ACCEPT (Eq. 3); ungraded items (and, with "
                    "--reviewed-only, grades QC has not reviewed) are unscored",
}
"""Built-in track -> how its outcomes are defined, in words (for `deskbench compare` and its page)."""


# -- converters: a track's scored items -> outcomes --------------------------------------------


def docqa_outcomes(items: Sequence[ItemScore], system: str, *, attempt: int = 0) -> list[ItemOutcome]:
    """docqa items (tracks/docqa/scoring/docqa.py) as outcomes; a "missing" item (the episode failed) is
    scored 0, as `deskbench score` counts it."""
    out = []
    for i in items:
        if i.status == "unscored" or i.accuracy is None:
            out.append(ItemOutcome(task_id=i.id, attempt=attempt, system=system, status="unscored"))
        else:
            out.append(ItemOutcome(task_id=i.id, attempt=attempt, system=system, status="scored",
                                   score=float(i.accuracy), correct=bool(i.correct)))
    return out


def chart_correct(item: AnalyticsItemScore) -> bool:
    """A chart is correct when its correctness C is 1 (see the module docstring)."""
    return item.correctness is not None and item.correctness >= 1.0 - 1e-9


def analytics_outcomes(items: Sequence[AnalyticsItemScore]) -> list[ItemOutcome]:
    out = []
    for i in items:
        if i.status != "scored" or i.score is None:
            out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="unscored"))
            continue
        correct = chart_correct(i) if i.category == "visualization" else i.score >= 1.0 - 1e-9
        out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="scored",
                               score=min(1.0, max(0.0, float(i.score))), correct=correct))
    return out


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


# -- the registry: score a system of a run with the track's own scorer, then convert -----------


def docqa_run_outcomes(store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
    from deskbench.runs.runner import run_submissions
    from deskbench.tracks.docqa.humans import tasks_scored
    from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all

    subs, failed = run_submissions(store, system)  # attempt 0, as `deskbench score`
    ran = {s.id for s in subs if s.id is not None} | set(failed)
    tasks = [t for t in tasks_scored(system, store.tasks(), ran) if t.id in ran]
    items, _ = score_all(tasks, subs, options.docqa or ScoreOptions(), errors=failed)
    return docqa_outcomes(items, system)


def analytics_run_outcomes(store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges, score_run

    judges = options.analytics or AnalyticsJudges()
    return analytics_outcomes(asyncio.run(score_run(store, system, judges, concurrency=options.concurrency)))


def deliverables_run_outcomes(store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run

    items = asyncio.run(score_run(store, systems=[system], judge_model=options.deliverables_judge,
                                  concurrency=options.concurrency))
    return deliverables_outcomes(items, reviewed_only=options.reviewed_only)


def outcomes_of(store: RunStore, system: str, options: OutcomeOptions | None = None) -> list[ItemOutcome]:
    """Every scored (task, attempt) of `system` in the run, by its track's definition."""
    from deskbench.tracks.registry import get_track

    return get_track(store.track()).outcomes(store, system, options or OutcomeOptions())
