"""docqa (MADQA) as a Track: question answering over a PDF collection with page citations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deskbench.runs.outcomes import DEFINITIONS
from deskbench.tasks.docqa import DocQASubmission, DocQATask

if TYPE_CHECKING:
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
    from deskbench.runs.store import RunStore


class DocQATrack:
    name = "docqa"
    title = "docqa (MADQA)"
    task_type: type[BaseModel] = DocQATask
    outcome_definition = DEFINITIONS["docqa"]
    submission_type: type[BaseModel] = DocQASubmission

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """The default track: any tasks file another track does not claim."""
        return not tasks.is_dir()

    def task_json(self, task: BaseModel) -> str:
        return task.model_dump_json()

    def load_task(self, text: str) -> BaseModel:
        return DocQATask.model_validate_json(text)

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        from deskbench.runs.outcomes import docqa_run_outcomes

        return docqa_run_outcomes(store, system, options)


TRACK = DocQATrack()
