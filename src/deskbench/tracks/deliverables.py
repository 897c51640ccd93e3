"""deliverables (consulting DRA) as a Track: client deliverables from task packages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deskbench.runs.outcomes import DEFINITIONS
from deskbench.tasks.deliverables import DeliverableSubmission, DeliverableTask

if TYPE_CHECKING:
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
    from deskbench.runs.store import RunStore


class DeliverablesTrack:
    name = "deliverables"
    title = "deliverables (consulting DRA)"
    task_type: type[BaseModel] = DeliverableTask
    outcome_definition = DEFINITIONS["deliverables"]
    submission_type: type[BaseModel] = DeliverableSubmission

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """A task package folder (or a folder of packages)."""
        return tasks.is_dir()

    def task_json(self, task: BaseModel) -> str:
        """The package and its folder (task.yaml does not say where it is; its inputs are there)."""
        assert isinstance(task, DeliverableTask)
        return json.dumps({"task": task.model_dump(mode="json", by_alias=True),
                           "directory": str(task.directory.resolve()) if task.directory else None})

    def load_task(self, text: str) -> BaseModel:
        row = json.loads(text)
        task = DeliverableTask.model_validate(row["task"])
        task.directory = Path(row["directory"]) if row.get("directory") else None
        return task

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        from deskbench.runs.outcomes import deliverables_run_outcomes

        return deliverables_run_outcomes(store, system, options)


TRACK = DeliverablesTrack()
