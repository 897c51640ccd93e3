"""docqa (MADQA) as a Track: question answering over a PDF collection with page citations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deskbench.contract.cli import DemoLeg, JudgeCalibration, Scaffolder, TrackCommand
from deskbench.contract.track import Track
from deskbench.tracks.docqa.options import DocQACompareOptions, DocQARunOptions, DocQAScoreOptions
from deskbench.tracks.docqa.outcomes import DEFINITION as DOCQA_DEFINITION
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

if TYPE_CHECKING:
    from deskbench.contract.export import Exporter, TaskText
    from deskbench.contract.mcp import McpTools
    from deskbench.contract.viewer import ViewerViews
    from deskbench.contract.web import WebScreens
    from deskbench.report.models import ReportSection
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
    from deskbench.runs.store import Episode, RunStore
    from deskbench.runs.track import PreparedRun, RunRequest
    from deskbench.tracks.docqa.score_command import DocQAScoreArgs


class DocQATrack(Track):
    name = "docqa"
    order = 10  # where it is listed among the tracks (contract/track.py)
    title = "docqa (MADQA)"
    task_type = DocQATask
    outcome_definition = DOCQA_DEFINITION
    submission_type = DocQASubmission

    agents = ("bm25-agent", "rag", "oracle", "guess", "lexical", "rlm", "external",
              "openai-file-search", "gemini-file-search", "heaven", "semtools-agent", "m3docrag", "colbert-llm", "mdocagent")  # tracks/docqa/agents/registry.py AGENTS
    limit_category = "step_limit"
    run_options = DocQARunOptions
    score_options = DocQAScoreOptions
    compare_options = DocQACompareOptions

    claims_any_file = True

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """The default track: any tasks file another track does not claim."""
        return not tasks.is_dir()

    def viewer_views(self) -> ViewerViews:
        from deskbench.tracks.docqa.viewer import VIEWS

        return VIEWS

    def web_screens(self) -> WebScreens:
        from deskbench.tracks.docqa.web import SCREENS

        return SCREENS

    def task_json(self, task: BaseModel) -> str:
        return task.model_dump_json()

    def load_task(self, text: str) -> BaseModel:
        return DocQATask.model_validate_json(text)

    def diagnose_output(self, episode: Episode, task: BaseModel | None) -> tuple[str, str]:
        from deskbench.tracks.docqa.diagnose import answer_output

        return answer_output(episode)

    def ray_resources(self, request: RunRequest) -> Mapping[str, float]:
        """A sandbox only for the agents that run model-written code (rlm); the others search."""
        from deskbench.tracks.docqa.agents.registry import NEEDS_SANDBOX

        return {"sandbox": 1} if any(a in NEEDS_SANDBOX for a in request.agents) else {}

    def export_task(self, task: BaseModel) -> TaskText | None:
        from deskbench.tracks.docqa.export import task_text

        return task_text(task)

    def export_answer(self, submission: BaseModel | None) -> str:
        from deskbench.tracks.docqa.export import answer_text

        return answer_text(submission)

    def export_formats(self) -> Sequence[Exporter]:
        from deskbench.tracks.docqa.export_madqa import EXPORTER

        return (EXPORTER,)

    def mcp_tools(self) -> McpTools:
        """`deskbench mcp` over a corpus (--corpus): search_documents, get_page, provide_answer (mcp_tools.py: loads the mcp extra, so only when asked)."""
        from deskbench.tracks.docqa.mcp_tools import DocqaMcpTools

        return DocqaMcpTools()

    def prepare(self, request: RunRequest) -> PreparedRun:
        return _prepare(request)

    def show_scores(self, store: RunStore, systems: Sequence[str], request: RunRequest, *, as_json: bool) -> bool:
        """The MADQA table per system (from `run`: the run's judge, defaults for the rest). The
        tasks scored are the run's (the store keeps those it ran: a --limit's first N), as `score
        RUN` scores them; from `run`, its tasks file (all of it) is not a scoring's --tasks."""
        from deskbench.tracks.docqa.score_command import score_run

        score_run(store, systems, _score_args(request), as_json=as_json)
        return True

    scores_files = True  # a predictions file (deskbench's or the official MADQA format) is docqa's

    def score_file(self, path: Path, request: RunRequest, *, as_json: bool) -> None:
        from deskbench.tracks.docqa.score_command import score_predictions

        score_predictions(path, _score_args(request), as_json=as_json)

    def scorer_options(self, request: ScorerRequest) -> AbstractContextManager[OutcomeOptions]:
        from deskbench.tracks.docqa.outcomes import docqa_scorer_options

        return docqa_scorer_options(request)

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        from deskbench.tracks.docqa.scoring.docqa_attempts import docqa_run_outcomes

        return docqa_run_outcomes(store, system, options)

    def report_section(self, stores: Sequence[RunStore], options: OutcomeOptions,
                       params: Mapping[str, object]) -> ReportSection:
        from deskbench.tracks.docqa.report import docqa_report_section

        return docqa_report_section(stores, options, params)

    def cli_commands(self) -> Sequence[TrackCommand]:
        # light: `deskbench --help` reads it too (its `deskbench.cli` entry point)
        from deskbench.tracks.docqa.cli import COMMANDS

        return COMMANDS

    def scaffolder(self) -> Scaffolder:
        from deskbench.tracks.docqa.scaffold import scaffold_docqa

        return scaffold_docqa

    def demo(self) -> DemoLeg:
        from deskbench.tracks.docqa.demo import LEG

        return LEG

    def judge_calibration(self) -> JudgeCalibration:
        from deskbench.tracks.docqa.cli.calibrate import CALIBRATION

        return CALIBRATION


TRACK = DocQATrack()


def _score_args(request: RunRequest) -> DocQAScoreArgs:
    """The scorer's arguments: `score`'s flags (its typed options), or from `run` its judge and
    the defaults."""
    from deskbench.tracks.docqa.score_command import DocQAScoreArgs

    params: dict[str, object] = {"judge": request.judge, "concurrency": request.concurrency,
                                 "items_out": request.items_out}
    o = request.options
    if isinstance(o, DocQAScoreOptions):
        params |= {**o.model_dump(exclude={"cache"}), "no_cache": not o.cache}
    return DocQAScoreArgs.of(params)


def _prepare(request: RunRequest) -> PreparedRun:
    from deskbench.errors import UserError
    from deskbench.mcp.external import external_options
    from deskbench.tracks.docqa.agents.mdocagent import pipeline_options
    from deskbench.tracks.docqa.run import RunSpec, prepare
    from deskbench.tracks.docqa.tasks import read_tasks

    if len(request.agents) > 1 or len(request.models) > 1:
        raise UserError("several --agent/--model pairs are for deliverables packages; run docqa systems one at a time")
    o = request.options_as(DocQARunOptions)
    spec = RunSpec(agent=(list(request.agents) or ["bm25-agent"])[0], model=(list(request.models) or ["openai/gpt-5-mini"])[0],
                   out=request.out, corpus=o.corpus, concurrency=request.concurrency, max_steps=o.max_steps,
                   top_k=o.top_k, view=o.view, protocol=o.protocol, preset=o.preset, retriever=o.retriever,
                   retriever_download=o.retriever_download, sampling=request.sampling, cache=request.cache,
                   prices=request.prices, unsafe_local=o.unsafe_local, max_sub_calls=o.max_sub_calls,
                   agent_options={**external_options(lambda name: getattr(o, name)),
                                  **pipeline_options(request.agents, o.text_retriever, o.image_retriever)},
                   attempts=request.attempts)
    spec.check()  # before reading tasks: a bad flag is named first
    return prepare(spec, read_tasks(request.tasks).items[:o.limit], tasks_file=str(request.tasks))
