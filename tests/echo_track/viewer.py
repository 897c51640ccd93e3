"""The echo track in the episode viewer (`deskbench view`), declared here and nowhere else: a
task shows the text to echo and the expected answer, a submission its echoed answer, a score the
letters whose case differs, and an episode says why it holds no model call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from deskbench.contract.viewer import AnswerView, EpisodeScore, Scores, TaskView, ViewerViews

if TYPE_CHECKING:
    from deskbench.runs.store import Episode, RunStore

NO_CALLS = "No model calls: an echo agent changes the text's case itself."


def _case_misses(answer: str, expected: str) -> int:
    """Letters in the wrong case (the echo agents only change case)."""
    return sum(a != e for a, e in zip(answer, expected, strict=False)) + abs(len(answer) - len(expected))


class EchoViews(ViewerViews):
    def task(self, task: BaseModel) -> TaskView | None:
        from echo_track import EchoTask

        if not isinstance(task, EchoTask):
            return None
        return TaskView(question=f"Echo {task.text!r}", gold=[task.expected],
                        facts=[("text", task.text), ("letters", str(len(task.text)))])

    def answer(self, submission: BaseModel) -> AnswerView | None:
        from echo_track import EchoSubmission

        return AnswerView(answer=[f"echoed: {submission.answer}"]) if isinstance(submission, EchoSubmission) else None

    def scores(self, store: RunStore, system: str) -> Scores:
        from echo_track import EchoSubmission, EchoTask

        expected = {t.id: t.expected for t in store.all_tasks() if isinstance(t, EchoTask)}
        out: Scores = {}
        for ep in store.episodes(system):
            answer = ep.submission.answer if isinstance(ep.submission, EchoSubmission) else ""
            misses = _case_misses(answer, expected[ep.task_id])
            out[(ep.task_id, ep.attempt)] = EpisodeScore(
                status="scored", score=float(misses == 0), correct=misses == 0,
                error_class=None if misses == 0 else "wrong case", metrics={"letters in the wrong case": misses})
        return out

    def stored(self, row: Mapping[str, Any]) -> EpisodeScore | None:
        return None  # the echo track keeps no --items-out rows of its own

    def no_model_calls(self, store: RunStore, episode: Episode) -> str | None:
        return NO_CALLS


VIEWS = EchoViews()
