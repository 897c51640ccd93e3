"""analytics (AIDABench) as a Track: QA, charts and spreadsheet files made with execute_code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deskbench.contract.cli import DemoLeg, JudgeCalibration, Scaffolder, TrackCommand
from deskbench.contract.track import Track
from deskbench.tracks.analytics.options import (
    AnalyticsCompareOptions,
    AnalyticsRunOptions,
    AnalyticsScoreOptions,
)
from deskbench.tracks.analytics.outcomes import DEFINITION as ANALYTICS_DEFINITION
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask

if TYPE_CHECKING:
    from deskbench.contract.export import TaskText
    from deskbench.contract.mcp import McpTools
    from deskbench.contract.viewer import ViewerViews
    from deskbench.contract.web import WebScreens
    from deskbench.report.models import ReportSection
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
    from deskbench.runs.store import Episode, RunStore
    from deskbench.runs.track import PreparedRun, RunRequest


class AnalyticsTrack(Track):
    name = "analytics"
    order = 20  # where it is listed among the tracks (contract/track.py)
    title = "analytics (AIDABench)"
    task_type = AnalyticsTask
    outcome_definition = ANALYTICS_DEFINITION
    submission_type = AnalyticsSubmission

    agents = ("analyst-agent", "external")  # tracks/analytics/agent.py ANALYTICS_AGENTS (not imported here: it loads the sandbox)
    limit_category = "round_limit"
    run_options = AnalyticsRunOptions
    score_options = AnalyticsScoreOptions
    compare_options = AnalyticsCompareOptions

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """A tasks file run by an analytics agent (the tasks file alone does not say its track);
        `external` serves every track, so with it the file's first task decides."""
        if tasks.is_dir() or not agents or agents[0] not in self.agents:
            return False
        return agents[0] != "external" or _first_task_is_analytics(tasks)

    def viewer_views(self) -> ViewerViews:
        from deskbench.tracks.analytics.viewer import VIEWS

        return VIEWS

    def web_screens(self) -> WebScreens:
        """How its judge calibration items are shown to labellers (tracks/analytics/web)."""
        from deskbench.tracks.analytics.web import SCREENS

        return SCREENS

    def task_json(self, task: BaseModel) -> str:
        return task.model_dump_json()

    def load_task(self, text: str) -> BaseModel:
        return AnalyticsTask.model_validate_json(text)

    def diagnose_output(self, episode: Episode, task: BaseModel | None) -> tuple[str, str]:
        from deskbench.tracks.analytics.diagnose import analytics_output

        return analytics_output(episode, task)

    def diagnose_categories(self) -> Sequence[str]:
        from deskbench.tracks.analytics.diagnose import CATEGORIES

        return CATEGORIES

    def export_task(self, task: BaseModel) -> TaskText | None:
        from deskbench.tracks.analytics.export import task_text

        return task_text(task)

    def export_answer(self, submission: BaseModel | None) -> str:
        from deskbench.tracks.analytics.export import answer_text

        return answer_text(submission)

    def mcp_tools(self) -> McpTools:
        """`deskbench mcp` for one task of a tasks file: execute_code, provide_answer (mcp_tools.py: loads the mcp extra, so only when asked)."""
        from deskbench.tracks.analytics.mcp_tools import AnalyticsMcpTools

        return AnalyticsMcpTools()

    def prepare(self, request: RunRequest) -> PreparedRun:
        from deskbench.errors import UserError
        from deskbench.mcp.external import external_options
        from deskbench.tracks.analytics.run import AnalyticsRunSpec, prepare_analytics
        from deskbench.tracks.analytics.score_command import file_judge_mode
        from deskbench.tracks.analytics.tasks import read_tasks

        if len(request.agents) > 1 or len(request.models) > 1:
            raise UserError("several --agent/--model pairs are for deliverables packages; run analytics systems one at a time")
        o = request.options_as(AnalyticsRunOptions)
        file_judge_mode(o.file_judge, o.file_judge_all)  # a bad pair is named before the run
        spec = AnalyticsRunSpec(
            agent=(list(request.agents) or ["analyst-agent"])[0], model=(list(request.models) or ["openai/gpt-5-mini"])[0], out=request.out,
            tasks_file=request.tasks, attempts=request.attempts, concurrency=request.concurrency,
            max_rounds=o.max_rounds, summary=not o.no_summary,
            last_round_note=o.last_round_note, cjk_font_hint=o.cjk_font_hint,
            sampling=request.sampling, cache=request.cache, prices=request.prices,
            unsafe_local=o.unsafe_local, agent_options=external_options(lambda name: getattr(o, name)))
        spec.check()
        if not request.tasks.exists():
            from deskbench.paths import tasks_missing

            raise tasks_missing(request.tasks)
        if not request.tasks.is_file():
            raise UserError(f"tasks file {request.tasks} not found; give an analytics tasks JSONL "
                            "(deskbench generate analytics)")
        return prepare_analytics(spec, read_tasks(request.tasks).items[:o.limit])

    def show_scores(self, store: RunStore, systems: Sequence[str], request: RunRequest, *, as_json: bool) -> bool:
        from deskbench.tracks.analytics.score_command import score_analytics

        o = request.options  # `run`'s options (its judges, --unsafe-local) or `score`'s (its judges)
        judges = o if isinstance(o, (AnalyticsRunOptions, AnalyticsScoreOptions)) else AnalyticsScoreOptions()
        score_analytics(store, system=systems[0] if len(systems) == 1 else None, judge=request.judge,
                        chart_judge=judges.chart_judge or request.judge, concurrency=request.concurrency,
                        items_out=request.items_out, as_json=as_json, file_judge=judges.file_judge,
                        file_judge_all=judges.file_judge_all,
                        unsafe_local=isinstance(o, AnalyticsRunOptions) and o.unsafe_local)
        return True

    def scorer_options(self, request: ScorerRequest) -> AbstractContextManager[OutcomeOptions]:
        from deskbench.tracks.analytics.score_command import analytics_scorer_options

        return analytics_scorer_options(request)

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        from deskbench.tracks.analytics.outcomes import analytics_run_outcomes

        return analytics_run_outcomes(store, system, options)

    def report_section(self, stores: Sequence[RunStore], options: OutcomeOptions,
                       params: Mapping[str, object]) -> ReportSection:
        from deskbench.tracks.analytics.report import analytics_report_section

        return analytics_report_section(stores, options, params)

    def cli_commands(self) -> Sequence[TrackCommand]:
        # light: `deskbench --help` reads it too (its `deskbench.cli` entry point)
        from deskbench.tracks.analytics.cli import COMMANDS

        return COMMANDS

    def scaffolder(self) -> Scaffolder:
        from deskbench.tracks.analytics.scaffold import scaffold_analytics

        return scaffold_analytics

    def demo(self) -> DemoLeg:
        from deskbench.tracks.analytics.demo import LEG

        return LEG

    def judge_calibration(self) -> JudgeCalibration:
        from deskbench.tracks.analytics.cli.calibrate import CALIBRATION

        return CALIBRATION


def _first_task_is_analytics(tasks: Path) -> bool:
    """Whether the file's first line is an analytics task (an instruction and input files); a
    file that cannot be read is left to the reader that will say why."""
    from deskbench.tasks.jsonl import first_row

    row = first_row(tasks)
    return isinstance(row, dict) and "instruction" in row and "inputs" in row


TRACK = AnalyticsTrack()
