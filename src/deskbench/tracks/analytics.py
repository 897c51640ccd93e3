"""analytics (AIDABench) as a Track: QA, charts and spreadsheet files made with execute_code."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deskbench.runs.outcomes import DEFINITIONS
from deskbench.tasks.analytics import AnalyticsSubmission, AnalyticsTask

if TYPE_CHECKING:
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
    from deskbench.runs.store import RunStore


class AnalyticsTrack:
    name = "analytics"
    title = "analytics (AIDABench)"
    task_type: type[BaseModel] = AnalyticsTask
    outcome_definition = DEFINITIONS["analytics"]
    submission_type: type[BaseModel] = AnalyticsSubmission

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """A tasks file run by an analytics agent (the tasks file alone does not say its track)."""
        from deskbench.agents.registry import ANALYTICS_AGENTS

        return not tasks.is_dir() and bool(agents) and agents[0] in ANALYTICS_AGENTS

    def task_json(self, task: BaseModel) -> str:
        return task.model_dump_json()

    def load_task(self, text: str) -> BaseModel:
        return AnalyticsTask.model_validate_json(text)

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        from deskbench.runs.outcomes import analytics_run_outcomes

        return analytics_run_outcomes(store, system, options)


TRACK = AnalyticsTrack()
