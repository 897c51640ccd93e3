"""deliverables in the episode viewer (Track.viewer_views): a prompt with its golden answer and
values, a response with its files, and each item's V, verifiers (llm_check verdicts with their
reasons), rubric, VRS and ACCEPT. Offline: the deterministic verifiers (llm_check ones stay
unobservable without a judge) and the run's rubric grades, so a new grade shows on the next load
(the grade tables are stamped)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from deskbench.contract.viewer import (
    AnswerView,
    EpisodeScore,
    FileView,
    Scores,
    TaskView,
    ViewerViews,
)
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask

if TYPE_CHECKING:
    from deskbench.runs.store import RunStore
    from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore

CONCURRENCY = 4  # offline scorers: verifiers; no judge calls


def deliverables_shown(item: DeliverableItemScore) -> EpisodeScore:
    """A deliverables item: V, the verifiers (llm_check verdicts with their reasons), the rubric, VRS, ACCEPT."""
    shown = EpisodeScore()
    shown.metrics = {"V (%)": round(item.v, 1), "verifiers passed / failed / unobservable":
                     f"{item.passed} / {item.failed} / {item.unobservable}",
                     "VRS relaxed": item.vrs_relaxed, "VRS strict": item.vrs_strict, "ACCEPT": item.accept,
                     "grade status": item.grade_status, "grader": item.grader}
    shown.verifiers = [r.model_dump() for r in item.verifiers]
    shown.rubric = item.scores
    for trap in item.traps:
        shown.metrics[f"trap {trap.id} ({trap.kind})"] = trap.outcome
    return shown


def pretty_lines(values: Mapping[str, Any]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in values.items())


class DeliverablesViews(ViewerViews):
    stamped: ClassVar[Mapping[str, str | None]] = {
        "rubric_grades": "created_at", "rubric_failures": "created_at", "rubric_qc": "created_at"}

    def task(self, task: BaseModel) -> TaskView | None:
        if not isinstance(task, DeliverableTask):
            return None
        t = task
        gold = [t.golden.answer] + ([f"decision: {t.golden.decision}"] if t.golden.decision else [])
        gold += [f"{v.name}: {v.value if v.value is not None else v.range} {v.unit or ''}".strip()
                 for v in t.golden.values]
        return TaskView(question=t.prompt, gold=gold,
                        facts=[("title", t.title), ("prompt class", t.prompt_class), ("inputs", ", ".join(t.inputs)),
                               ("required outputs", ", ".join(o.name for o in t.required_outputs))])

    def answer(self, submission: BaseModel) -> AnswerView | None:
        if not isinstance(submission, DeliverableSubmission):
            return None
        s = submission
        return AnswerView(answer=[s.response] if s.response else [],
                          files=[FileView(n=n, name=f.name, size=f.size) for n, f in enumerate(s.files)])

    def scores(self, store: RunStore, system: str) -> Scores:
        """Deterministic verifiers and the run's rubric grades: VRS and ACCEPT when graded, else unscored."""
        from deskbench.tracks.deliverables.outcomes import deliverables_outcomes
        from deskbench.tracks.deliverables.scoring.deliverables_run import score_run

        items = asyncio.run(score_run(store, systems=[system], concurrency=CONCURRENCY))
        out: Scores = {}
        for item, outcome in zip(items, deliverables_outcomes(items), strict=True):
            shown = deliverables_shown(item).with_outcome(outcome)
            if shown.status == "unscored":
                shown.why_unscored = "not graded yet (grade it with 'deskbench serve --out RUNDIR')"
            out[(item.task_id, item.attempt)] = shown
        return out

    def stored(self, row: Mapping[str, Any]) -> EpisodeScore:
        from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore

        shown = deliverables_shown(DeliverableItemScore.model_validate(row))
        for name, said in (row.get("judge") or {}).items():  # the rubric grade's justifications
            if isinstance(said, dict) and isinstance(said.get("reasoning"), dict) and said["reasoning"]:
                shown.reasoning.append((f"{name} ({said.get('grader')})", pretty_lines(said["reasoning"])))
        return shown


VIEWS = DeliverablesViews()
