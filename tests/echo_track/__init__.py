"""A fourth track in one folder, for the test that the harness needs no edit to take one.

echo: each task is a text and the answer expected from it; an agent answers by transforming the
text (`echo-upper`, `echo-lower`), no model. Everything the harness needs comes from here:
task and submission types for the store, which `--tasks` it claims, its run options, how a run
is prepared for the one runner, how an item scores as an ItemOutcome, what `run` prints, and its
section of the report (the shared default: a leaderboard and pairwise tests from its outcomes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from deskbench.agents.base import AgentResult
from deskbench.contract.cli import DemoLeg, TrackCommand
from deskbench.contract.track import Track
from deskbench.contract.viewer import ViewerViews
from deskbench.errors import UserError
from deskbench.runs.identity import SystemConfig
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
from deskbench.runs.runner import EpisodeFn, HasId
from deskbench.runs.store import Episode, RunStore
from deskbench.runs.track import PreparedRun, PreparedSystem, RunRequest
from echo_track.options import EchoRunOptions


class EchoTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str
    expected: str


class EchoSubmission(BaseModel):
    model_config = ConfigDict(extra="forbid")
    track: Literal["echo"] = "echo"
    id: str
    answer: str


AGENTS: dict[str, Callable[[str], str]] = {"echo-upper": str.upper, "echo-lower": str.lower}
RAY_RESOURCE = "echo_lane"  # what a Ray worker of an echo run holds (ray_resources)


class EchoTrack(Track):
    name = "echo"
    title = "echo (test track)"
    task_type: type[BaseModel] = EchoTask
    submission_type: type[BaseModel] = EchoSubmission
    outcome_definition = "score = correct = the answer equals the expected text"
    agents = tuple(AGENTS)
    limit_category = "step_limit"
    run_options = EchoRunOptions  # its own flags, in its folder (echo_track/options.py)

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        return bool(agents) and agents[0] in AGENTS

    def task_json(self, task: BaseModel) -> str:
        return task.model_dump_json()

    def load_task(self, text: str) -> BaseModel:
        return EchoTask.model_validate_json(text)

    def prepare(self, request: RunRequest) -> PreparedRun:
        unknown = [a for a in request.agents if a not in AGENTS]
        if unknown:
            raise UserError(f"unknown echo agent {unknown[0]!r}; choose one of: {', '.join(AGENTS)}")
        tasks = [EchoTask.model_validate_json(line) for line in request.tasks.read_text().splitlines() if line.strip()]
        options = request.options_as(EchoRunOptions)
        tasks = tasks[:options.limit]
        store = RunStore(request.out)

        @asynccontextmanager
        async def start() -> AsyncIterator[dict[str, EpisodeFn]]:
            def episode_of(agent: str) -> EpisodeFn:
                async def episode(task: HasId, attempt: int) -> AgentResult:
                    assert isinstance(task, EchoTask)
                    return AgentResult(status="ok", submission=EchoSubmission(id=task.id, answer=AGENTS[agent](task.text) + options.suffix))  # type: ignore[arg-type]
                return episode

            yield {agent: episode_of(agent) for agent in request.agents}

        # the runner files the tasks, records each system's identity (the shared one, as is) and counts what is done
        systems = [PreparedSystem(name=a, model=None, config=SystemConfig(track=self.name, agent=a, settings={"suffix": options.suffix})) for a in request.agents]
        return PreparedRun(track=self.name, store=store, tasks=tasks, systems=systems, start=start,
                           attempts=request.attempts, concurrency=request.concurrency)

    def cli_commands(self) -> Sequence[TrackCommand]:
        """Its own command, `deskbench echo-say` (echo_track/cli.py)."""
        from echo_track.cli import COMMANDS

        return COMMANDS

    def demo(self) -> DemoLeg:
        """Its leg of `deskbench demo`, with its own flag --echo-limit (echo_track/demo.py)."""
        from echo_track.demo import LEG

        return LEG

    def viewer_views(self) -> ViewerViews:
        """Its own view in `deskbench view` (echo_track/viewer.py)."""
        from echo_track.viewer import VIEWS

        return VIEWS

    def diagnose_output(self, episode: Episode, task: BaseModel | None) -> tuple[str, str]:
        sub = episode.submission
        return ("ok", "") if isinstance(sub, EchoSubmission) and sub.answer else ("no_answer", "")

    def ray_resources(self, request: RunRequest) -> Mapping[str, float]:
        """Its own Ray resource, no sandbox (it runs no code): on a cluster each worker holds one
        `echo_lane` (tests/contract/test_fourth_track_ray.py)."""
        return {RAY_RESOURCE: 1}

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        expected = {t.id: t.expected for t in store.all_tasks() if isinstance(t, EchoTask)}
        out = []
        for ep in store.episodes(system):
            sub = ep.submission if isinstance(ep.submission, EchoSubmission) else None
            right = sub is not None and sub.answer == expected[ep.task_id]
            out.append(ItemOutcome(task_id=ep.task_id, attempt=ep.attempt, system=system, status="scored",
                                   score=float(right), correct=right))
        return out

    @contextmanager
    def scorer_options(self, request: ScorerRequest) -> Iterator[OutcomeOptions]:
        yield OutcomeOptions(concurrency=request.concurrency)


TRACK = EchoTrack()
