"""The contract between the core and a track: what a track must say, and the hooks it may fill.

A track is one benchmark (docqa, analytics, deliverables, a plugin's). Like Inspect AI's Task
(dataset + solver + scorer), it declares its task type (the dataset), its agents (the solvers)
and how one item scores and aggregates (`outcomes`, `scorer_options`); `prepare` hands the one
runner its episodes. Everything else the core shows or does for a track is a hook below with a
default, so a track fills in only what it has: the core never names a track, and a fourth one
with its own viewer page, Ray resource, MCP tools or CLI command edits nothing outside its folder.

This module imports nothing of deskbench (pydantic only): every core module may import it without
a cycle. A hook whose default needs the core returns None (or False) and the core does the default.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from deskbench.contract.cli import DemoLeg, JudgeCalibration, Scaffolder, TrackCommand
    from deskbench.contract.export import Exporter, TaskText
    from deskbench.contract.mcp import McpTools
    from deskbench.contract.viewer import ViewerViews
    from deskbench.contract.web import WebScreens
    from deskbench.report.models import ReportSection
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
    from deskbench.runs.store import Episode, RunStore
    from deskbench.runs.track import PreparedRun, RunRequest


class NoOptions(BaseModel):
    """A command's options of a track that has none of its own (the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Track(ABC):
    """One benchmark of the harness. Subclass it, fill the abstract members, register an instance
    (`deskbench.contract.registry.register_track`, or the `deskbench.tracks` entry point)."""

    # --- what every track declares -------------------------------------------------------
    name: ClassVar[str]  # as stored in a run's meta and shown to users
    title: ClassVar[str]  # "docqa (MADQA)"
    task_type: ClassVar[type[BaseModel]]
    submission_type: ClassVar[type[BaseModel]]
    outcome_definition: ClassVar[str]  # how an item's score and binary outcome are defined, in words
    agents: ClassVar[tuple[str, ...]]  # the --agent names it runs
    # Each command's options beyond every track's, as a pydantic model: a field is a flag, its
    # type, default and description the flag's (contract/options.py); `prepare` gets an instance.
    run_options: ClassVar[type[BaseModel]] = NoOptions
    score_options: ClassVar[type[BaseModel]] = NoOptions
    compare_options: ClassVar[type[BaseModel]] = NoOptions

    @abstractmethod
    def prepare(self, request: RunRequest) -> PreparedRun:
        """Check the request, open the store and the models, and hand the one runner the run
        (runs/track.py execute_run). A user's mistake is a UserError before anything is created."""

    @abstractmethod
    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        """Every scored (task, attempt) of `system`, unscored kept apart from wrong."""

    @abstractmethod
    def scorer_options(self, request: ScorerRequest) -> AbstractContextManager[OutcomeOptions]:
        """The scorer `outcomes` takes, built as `deskbench score` builds it from a command's flags:
        --judge, the judge calls in flight, and the track's own in `request.options_as(<its
        score_options model>)`, validated by the core; the judges it opens are closed when the
        context exits."""

    # --- hooks with defaults --------------------------------------------------------------
    # where the track is listed (registry, `--help` panels, `list`, the demo): lower first, then
    # by name; the built-ins say 10, 20, 30 (contract/formats.py DEFAULT_ORDER for one that says none)
    order: ClassVar[int] = 100
    limit_category: ClassVar[str] = "step_limit"  # what `diagnose` calls an episode out of its budget
    # a track whose `claims` takes any tasks file (docqa's): asked after every other track
    claims_any_file: ClassVar[bool] = False

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """Whether `deskbench run --tasks TASKS --agent ...` is this track's when its tasks alone
        do not say (contract/registry.py track_for). Default: a file run by one of its agents."""
        return not tasks.is_dir() and bool(agents) and agents[0] in self.agents

    def task_json(self, task: BaseModel) -> str:
        """A task as the run store keeps it (a task may carry more than its model: a folder)."""
        return task.model_dump_json()

    def load_task(self, text: str) -> BaseModel:
        """The inverse of task_json."""
        return self.task_type.model_validate_json(text)

    def diagnose_output(self, episode: Episode, task: BaseModel | None) -> tuple[str, str]:
        """`diagnose`'s category (and a detail) for an episode that ended ok: "ok" when it produced
        what the task asks for, else why not ("no_answer", "file_not_produced", ...)."""
        return ("ok", "") if episode.submission is not None else ("no_answer", "")

    def diagnose_categories(self) -> Sequence[str]:
        """The categories `diagnose_output` gives besides "ok" and those of a failed episode
        (timeout, content_policy, ...: the same for every track), in the order `deskbench
        diagnose` shows them (runs/diagnose.py)."""
        return ("no_answer",)

    def ray_resources(self, request: RunRequest) -> Mapping[str, float] | None:
        """The custom Ray resources (beyond its one CPU) a worker running this run's episodes holds
        on a Ray cluster (`run --executor ray`), by name: {} for none, {"sandbox": 1} for a run
        that executes code. Each node declares how many it has (`ray start --resources`); a cluster
        without one is one line naming it. None (the default) leaves it to the core: a sandbox,
        as a run that executes code needs (runs/ray_executor.py)."""
        return None

    def export_task(self, task: BaseModel) -> TaskText | None:
        """A task as `deskbench export` shows it: what was asked, the gold answer and the rest of
        the gold as metadata (contract/export.py); None (the default) leaves it to the core: the
        episode's first user message, no target."""
        return None

    def export_answer(self, submission: BaseModel | None) -> str:
        """A submission's answer as text in an export; "" (the default) when none or unsaid."""
        return ""

    def export_formats(self) -> Sequence[Exporter]:
        """The formats of `deskbench export --format` this track adds, each writing one of its runs
        (runs/export/__init__.py Exporter; docqa: the official MADQA predictions). Default: none."""
        return ()

    def mcp_tools(self) -> McpTools | None:
        """This track's tools for `deskbench mcp` outside a run, over a corpus or for one task of
        its tasks (contract/mcp.py); None (the default): the track serves none over MCP."""
        return None

    def show_scores(self, store: RunStore, systems: Sequence[str], request: RunRequest, *, as_json: bool) -> bool:
        """Print what `deskbench run` shows once the episodes are done and say True; False (the
        default) leaves it to the core: each system's outcomes (runs/track_outcomes.py show_scores)."""
        return False

    scores_files: ClassVar[bool] = False  # `deskbench score FILE` (a predictions file, not a run) is this track's

    def score_file(self, path: Path, request: RunRequest, *, as_json: bool) -> None:
        """Score a predictions file given to `deskbench score` (not a run directory), with
        `request.options` its `score_options`; the first track with `scores_files` takes it."""
        raise NotImplementedError(f"the {self.name} track scores no predictions file")

    def report_section(self, stores: Sequence[RunStore], options: OutcomeOptions,
                       params: Mapping[str, object]) -> ReportSection | None:
        """This track's part of `deskbench report` over its runs; None (the default) leaves it to
        the core: a leaderboard and the pairwise tests from its outcomes (report/sections.py)."""
        return None

    def scoring_change_times(self, store: RunStore, system: str) -> Mapping[tuple[str, int], str]:
        """When each (task id, attempt) of `system` last changed in a way its scoring reads besides
        its episode (deliverables: a rubric grade, a QC action), as ISO 8601 UTC: a verdict stored
        before that no longer holds (runs/current_scorings.py). Default: nothing else is read."""
        return {}

    def viewer_views(self) -> ViewerViews | None:
        """How the episode viewer (`deskbench view`) shows this track's tasks, submissions and
        scores (contract/viewer.py); None (the default): the core's views (the task's question or
        JSON, the submission as JSON, the scores of `outcomes` with no details)."""
        return None

    def web_screens(self) -> WebScreens | None:
        """This track's web screens for people (`deskbench serve`: a human baseline, rubric
        grading) and what `serve batches` needs of them (contract/web.py); None (the default):
        none, the core serves what it has (judge calibration) or says what is missing."""
        return None

    def cli_commands(self) -> Sequence[TrackCommand]:
        """The commands this track adds to `deskbench` (contract/cli.py): its own top-level commands
        and groups (`rubric`, `analyse`) and its subcommands of a core group (`generate <name>`),
        each imported and built only when a command line names it (cli/root.py). Default: none."""
        return ()

    def scaffolder(self) -> Scaffolder | None:
        """What `deskbench init DIR --track NAME` calls to write a task set over the user's own
        files (contract/cli.py); None (the default): init does not scaffold this track."""
        return None

    def demo(self) -> DemoLeg | None:
        """This track's part of the bundled demo (`deskbench demo`, `generate demo`: contract/cli.py);
        None (the default): the demo leaves the track out."""
        return None

    def judge_calibration(self) -> JudgeCalibration | None:
        """The items of this track's runs `deskbench calibrate sample` samples for people to label,
        judged by its judges (contract/cli.py); None (the default): no judge of it to calibrate."""
        return None
