"""Score a deliverables run: every episode's verifiers (an `llm_check` asks the judge model when
one is given), with the run's final rubric grades (primary grade, QC applied, stale grades of
rerun episodes ignored) from the grade store."""

from __future__ import annotations

from deskbench.models.types import ChatModel
from deskbench.runs.store import RunStore
from deskbench.scoring.judge_log import LLM_CHECK, recorded
from deskbench.tracks.deliverables.grades import GradeStore
from deskbench.tracks.deliverables.scoring.deliverables import (
    DeliverableItemScore,
    GradeInput,
    score_episodes,
)
from deskbench.tracks.deliverables.scoring.verifiers import llm_check_judge
from deskbench.tracks.deliverables.tasks import DeliverableTask


def grade_inputs(store: RunStore, system: str | None = None) -> dict[tuple[str, str, int], GradeInput]:
    """The final grade of every graded episode, as scoring reads it."""
    grades = GradeStore(store.dir)
    try:
        finals = grades.final_grades(system, verifiers=False)  # verifiers run once, in scoring
    finally:
        grades.close()
    return {key: GradeInput(scores=g.scores, grader=g.grader, status=g.status,
                            verifier_overrides={o.id: o.final for o in g.verifier_overrides},
                            return_reasons=g.return_reasons, stars=g.stars, declared_best=g.declared_best)
            for key, g in finals.items()}


async def score_run(store: RunStore, *, systems: list[str] | None = None, judge_model: ChatModel | None = None,
                    concurrency: int = 8) -> list[DeliverableItemScore]:
    tasks = {t.id: t for t in store.tasks_of(DeliverableTask)}
    episodes = [ep for ep in store.episodes() if systems is None or ep.system in systems]
    judge = llm_check_judge(recorded(judge_model, LLM_CHECK)) if judge_model is not None else None
    items = await score_episodes(tasks, episodes, store.dir, grades=grade_inputs(store), judge=judge,
                                 concurrency=concurrency)
    return sorted(items, key=lambda i: (i.system, i.task_id, i.attempt))
