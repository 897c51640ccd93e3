"""deliverables (consulting DRA) as a Track: client deliverables from task packages."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deskbench.contract.cli import DemoLeg, TrackCommand
from deskbench.contract.track import Track
from deskbench.tracks.deliverables import deep_research
from deskbench.tracks.deliverables.options import (
    DeliverablesCompareOptions,
    DeliverablesRunOptions,
    DeliverablesScoreOptions,
)
from deskbench.tracks.deliverables.outcomes import DEFINITION as DELIVERABLES_DEFINITION
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask

if TYPE_CHECKING:
    from deskbench.contract.export import TaskText
    from deskbench.contract.mcp import McpTools
    from deskbench.contract.viewer import ViewerViews
    from deskbench.contract.web import WebScreens
    from deskbench.report.models import ReportSection
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
    from deskbench.runs.store import Episode, RunStore
    from deskbench.runs.track import PreparedRun, RunRequest


class DeliverablesTrack(Track):
    name = "deliverables"
    order = 30  # where it is listed among the tracks (contract/track.py)
    title = "deliverables (consulting DRA)"
    task_type = DeliverableTask
    outcome_definition = DELIVERABLES_DEFINITION
    submission_type = DeliverableSubmission

    agents = ("deliverable-agent", "external", *deep_research.AGENTS)  # tracks/deliverables/agent.py DELIVERABLE_AGENTS
    limit_category = "round_limit"
    run_options = DeliverablesRunOptions
    score_options = DeliverablesScoreOptions
    compare_options = DeliverablesCompareOptions

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """A task package folder (or a folder of packages)."""
        return tasks.is_dir()

    def viewer_views(self) -> ViewerViews:
        from deskbench.tracks.deliverables.viewer import VIEWS

        return VIEWS

    def web_screens(self) -> WebScreens:
        from deskbench.tracks.deliverables.web import SCREENS

        return SCREENS

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

    def diagnose_output(self, episode: Episode, task: BaseModel | None) -> tuple[str, str]:
        from deskbench.tracks.deliverables.diagnose import deliverables_output

        return deliverables_output(episode, task)

    def diagnose_categories(self) -> Sequence[str]:
        from deskbench.tracks.deliverables.diagnose import CATEGORIES

        return CATEGORIES

    def export_task(self, task: BaseModel) -> TaskText | None:
        from deskbench.tracks.deliverables.export import task_text

        return task_text(task)

    def export_answer(self, submission: BaseModel | None) -> str:
        from deskbench.tracks.deliverables.export import answer_text

        return answer_text(submission)

    def mcp_tools(self) -> McpTools:
        """`deskbench mcp` for one package: read_input, execute_code, submit_deliverable (mcp_tools.py: loads the mcp extra, so only when asked)."""
        from deskbench.tracks.deliverables.mcp_tools import DeliverablesMcpTools

        return DeliverablesMcpTools()

    def prepare(self, request: RunRequest) -> PreparedRun:
        """Every (--agent, --model) pair is a system; all of them run at once."""
        from deskbench.errors import UserError
        from deskbench.mcp.external import external_options
        from deskbench.tracks.deliverables.run import (
            DeliverablesRunSpec,
            pair_systems,
            prepare_deliverables,
        )
        from deskbench.tracks.deliverables.web_access import parse_web
        from deskbench.tracks.deliverables.web_deny import parse_deny

        o = request.options_as(DeliverablesRunOptions)
        if o.web_record is not None and o.web is None:
            raise UserError("--web-record saves what a live --web returns; give --web too (e.g. --web brave)")
        spec = DeliverablesRunSpec(
            systems=tuple(pair_systems(list(request.agents) or ["deliverable-agent"],
                                       list(request.models) or ["openai/gpt-5-mini"])),
            packages=request.tasks, out=request.out, only_tasks=o.only_task,
            only_systems=o.only_system, rerun=o.rerun, attempts=request.attempts,
            concurrency=min(request.concurrency, 4), max_rounds=o.max_rounds, sampling=request.sampling,
            inline_chars=o.inline_chars, cache=request.cache, prices=request.prices,
            unsafe_local=o.unsafe_local, trap_hints=o.trap_hints,
            web=parse_web(o.web, o.web_record) if o.web is not None else None,
            deny=parse_deny(o.deny_url, allow_peeking=o.allow_peeking),
            agent_options=external_options(lambda name: getattr(o, name)))
        return prepare_deliverables(spec)

    def show_scores(self, store: RunStore, systems: Sequence[str], request: RunRequest, *, as_json: bool) -> bool:
        from deskbench.tracks.deliverables.score_command import score_deliverables

        o = request.options  # `score`'s flags; from `run`, the defaults
        score_deliverables(store, systems=list(systems), judge=request.judge, concurrency=request.concurrency,
                           as_json=as_json, items_out=request.items_out,
                           reviewed_only=isinstance(o, DeliverablesScoreOptions) and o.reviewed_only)
        return True

    def scorer_options(self, request: ScorerRequest) -> AbstractContextManager[OutcomeOptions]:
        from deskbench.tracks.deliverables.outcomes import deliverables_scorer_options

        return deliverables_scorer_options(request)

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        from deskbench.tracks.deliverables.outcomes import deliverables_run_outcomes

        return deliverables_run_outcomes(store, system, options)

    def report_section(self, stores: Sequence[RunStore], options: OutcomeOptions,
                       params: Mapping[str, object]) -> ReportSection:
        from deskbench.tracks.deliverables.report import deliverables_report_section

        return deliverables_report_section(stores, options, params)

    def scoring_change_times(self, store: RunStore, system: str) -> Mapping[tuple[str, int], str]:
        from deskbench.tracks.deliverables.grades import change_times

        return change_times(store, system)

    def cli_commands(self) -> Sequence[TrackCommand]:
        # light: `deskbench --help` reads it too (its `deskbench.cli` entry point)
        from deskbench.tracks.deliverables.cli import COMMANDS

        return COMMANDS

    def demo(self) -> DemoLeg:
        from deskbench.tracks.deliverables.demo import LEG

        return LEG


TRACK = DeliverablesTrack()
