"""Grade a deliverables run's episodes with an LLM grader (`deskbench rubric grade`, the demo).

Each ok episode not yet graded by this grader (unless `regrade`) is graded once, with its
package's verifier results shown to the grader; a grade or a "could not grade" is saved as soon
as it is known, so an interrupted grading run keeps what it did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deskbench.models.types import ChatModel
from deskbench.runs.outputs import episode_outputs
from deskbench.runs.store import Episode
from deskbench.scoring.judge_log import RUBRIC_GRADER, episode, recorded, recording
from deskbench.tracks.deliverables.grades import GradeStore
from deskbench.tracks.deliverables.scoring.rubric import GradeFailure, GradeMode, grade_episode
from deskbench.tracks.deliverables.scoring.verifiers import run_verifiers
from deskbench.tracks.deliverables.tasks import DeliverableSubmission


@dataclass
class GradingCounts:
    graded: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)


def episodes_to_grade(store: GradeStore, grader_id: str, *, system: str | None = None,
                      regrade: bool = False) -> tuple[list[Episode], int]:
    """(ok deliverables episodes still to grade, how many this grader already graded)."""
    tasks = store.tasks()
    done = set() if regrade else store.graded(grader_id, system)
    todo = [e for e in store.runs.episodes(system)
            if e.status == "ok" and isinstance(e.submission, DeliverableSubmission)
            and e.task_id in tasks and (e.task_id, e.system, e.attempt) not in done]
    return todo, len(done & set(store.episodes(system)))


async def grade_run(store: GradeStore, grader: ChatModel, todo: list[Episode], *, mode: GradeMode = "all",
                    concurrency: int = 4,
                    on_graded: Callable[[Episode], None] | None = None) -> GradingCounts:
    tasks = store.tasks()
    counts = GradingCounts()
    slots = asyncio.Semaphore(concurrency)
    recording_grader = recorded(grader, RUBRIC_GRADER)

    async def one(ep: Episode) -> None:
        async with slots:
            task = tasks[ep.task_id]
            sub = ep.submission
            assert isinstance(sub, DeliverableSubmission)
            results = run_verifiers(task.verifiers, sub.response, episode_outputs(store.dir, ep))
            with episode(ep.task_id, ep.system, ep.attempt):  # the grader's calls, kept with the episode
                result = await grade_episode(recording_grader, task, ep, store.dir, mode=mode,
                                             verifier_results=results)
        store.save(result)
        if isinstance(result, GradeFailure):
            counts.failed += 1
            counts.failures.append({"task_id": ep.task_id, "system": ep.system, "attempt": ep.attempt,
                                    "error": result.error})
        else:
            counts.graded += 1
        if on_graded:
            on_graded(ep)

    with recording(store.runs):
        await asyncio.gather(*(one(e) for e in todo))
    return counts
