"""A custom docqa scorer: an answer is right when one gold variant matches it exactly after
lower-casing and trimming (stricter than ANLS*). A failed episode is wrong (0), as in deskbench."""

from pydantic import BaseModel

from deskbench.runs.outcomes import ItemOutcome
from deskbench.runs.store import Episode
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


def _norm(values: list[str]) -> list[str]:
    return sorted(v.strip().lower() for v in values)


class ExactMatchScorer:
    track = "docqa"
    description = "exact match of the answer list to a gold variant, case and spaces ignored"

    def score(self, task: BaseModel, episode: Episode) -> ItemOutcome:
        assert isinstance(task, DocQATask)
        sub = episode.submission
        answer = sub.answer if isinstance(sub, DocQASubmission) and episode.status == "ok" else []
        right = bool(answer) and any(_norm(answer) == _norm(v) for v in task.answer_variants)
        return ItemOutcome(task_id=task.id, attempt=episode.attempt, system=episode.system,
                           status="scored", score=float(right), correct=right)
