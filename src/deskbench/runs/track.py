"""What a track hands the one runner, and the runner itself.

Each track prepares a run its own way (its tasks, its agents, its checks: `tracks/docqa/run.py`,
`tracks/analytics/run.py`, `tracks/deliverables/run.py`) and hands back a `PreparedRun`: the store, the tasks,
the systems and a `start` context that opens the run's resources inside the event loop (models'
connections, a sandbox, a web backend) and gives one episode function per system. Everything
after that is shared: episodes, attempts, resume, concurrency, progress and closing are
`execute_run`'s, once for every track.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.models.resilient import ResilientModel, UsageLedger
from deskbench.models.settings import Sampling
from deskbench.runs.budget import Limits, RunBudget, check_prices, remember_limits
from deskbench.runs.identity import SystemConfig, remember_config
from deskbench.runs.outcomes import OptionsT, options_as
from deskbench.runs.runner import EpisodeFn, HasId, RunCounts, run_attempts
from deskbench.runs.store import RunStore


@dataclass(frozen=True)
class RunRequest:
    """What `deskbench run` was given: the options every track takes, typed, and the track's own
    in `options`, a validated instance of its `run_options` model (contract/options.py; which
    flags a track takes is checked before this is built). `deskbench score RUN` asks a track's
    `show_scores` with one too: its `score_options` instance, and `items_out`."""

    tasks: Path
    out: Path
    agents: Sequence[str] = ()  # as given; empty: the track's default agent
    models: Sequence[str] = ()
    attempts: int = 1
    concurrency: int = 16
    sampling: Sampling = Sampling()
    cache: bool = False
    prices: Path | None = None
    judge: str | None = None
    options: BaseModel | None = None  # None: the track's defaults
    capabilities: Path | None = None  # --capabilities (a Ray worker applies them too)
    ray_address: str | None = None  # --executor ray: the cluster's head
    items_out: Path | None = None  # `score --items-out`
    limits: Limits = Limits()  # run --max-cost, --token-budget, --on-budget (runs/budget.py); no system's identity

    def options_as(self, model: type[OptionsT]) -> OptionsT:
        """The track's options as its model (`prepare` of the track that declared `model`); the
        model's defaults when the request carries none of it (scoring a run from `run`)."""
        return options_as(self.options, model)

    def shippable(self) -> RunRequest:
        """The request with every path made absolute (options' too): a Ray worker does not run in
        the driver's folder."""
        def absolute(value: Any) -> Any:
            return value.resolve() if isinstance(value, Path) else value

        options = self.options
        if options is not None:
            options = options.model_copy(update={k: absolute(v) for k, v in options if isinstance(v, Path)})
        return replace(self, tasks=self.tasks.resolve(), out=self.out.resolve(), prices=absolute(self.prices),
                       capabilities=absolute(self.capabilities), items_out=absolute(self.items_out),
                       options=options)


@dataclass
class PreparedSystem:
    name: str
    model: ResilientModel | None  # None: an agent that calls no model
    already_done: int = 0  # counted by the runner (`ready`)
    config: SystemConfig | None = None  # its identity, recorded by the runner; None: the track recorded it


@dataclass
class PreparedRun:
    """A run ready to go; `start()` is entered in the run's event loop."""

    track: str
    store: RunStore
    tasks: Sequence[HasId]
    systems: list[PreparedSystem]
    start: Callable[[], AbstractAsyncContextManager[Mapping[str, EpisodeFn]]]
    attempts: int = 1
    concurrency: int = 16  # episodes in flight, per system
    replace: bool = False  # run every (task, attempt) again, replacing the stored episode
    warnings: list[str] = field(default_factory=list)
    retry_errors: bool = False  # run the errored episodes again, each as a new try (`retrying_errors`)
    booked: bool = False  # `ready` did the bookkeeping
    meta: dict[str, str] = field(default_factory=dict)  # the run's meta `ready` writes once the tasks are filed
    limits: Limits = field(default_factory=Limits)  # cost and token limits (runs/budget.py; `limited_by`)
    budget: RunBudget | None = None  # the run's spend against `limits`, made by `ready`

    @property
    def per_system(self) -> int:
        return len(self.tasks) * self.attempts

    @property
    def total(self) -> int:
        return self.per_system * len(self.systems)

    @property
    def already_done(self) -> int:
        return sum(s.already_done for s in self.systems)

    def done_before(self, name: str, wanted: set[tuple[str, int]]) -> int:
        if self.replace:
            return 0
        errored = self.store.errored(name) if self.retry_errors else set()
        return len((self.store.done(name) - errored) & wanted)

    def retrying_errors(self) -> PreparedRun:
        """--retry-errors, on any track's prepared run: the episodes stored with status "error"
        (not "limit", not "ok") are run again, each stored as a new try of its episode with the
        earlier ones kept (store.record). Not a setting of the run: its identity is unchanged."""
        self.retry_errors = True
        for s in self.systems:
            s.already_done = self.done_before(s.name, wanted(self.tasks, self.attempts))
        return self

    def limited_by(self, limits: Limits) -> PreparedRun:
        """--max-cost, --token-budget, --on-budget, on any track's prepared run, before `ready`."""
        self.limits = limits
        return self

    def stored_line(self) -> str:
        """What an interrupted run leaves: how many of its episodes are stored, and how to resume."""
        asked = wanted(self.tasks, self.attempts)
        stored = sum(len(self.store.done(s.name) & asked) for s in self.systems)
        return (f"{stored} of {self.total} episodes stored in {self.store.dir}; "
                "run the same command to resume")


@dataclass
class Outcome:
    system: str
    counts: RunCounts
    ledger: UsageLedger | None


def wanted(tasks: Sequence[HasId], attempts: int) -> set[tuple[str, int]]:
    """Every (task, attempt) a run asks for: what `already_done` is counted against."""
    return {(t.id, a) for t in tasks for a in range(attempts)}


def _task_models(tasks: Sequence[HasId]) -> list[BaseModel]:
    """A run's tasks as the store files them: the track's task models (pydantic), checked."""
    models: list[BaseModel] = [t for t in tasks if isinstance(t, BaseModel)]
    if len(models) < len(tasks):
        kind = next(type(t).__name__ for t in tasks if not isinstance(t, BaseModel))
        raise TypeError(f"a PreparedRun's tasks are the track's task models (pydantic), not {kind}")
    return models


def ready(prep: PreparedRun) -> PreparedRun:
    """The bookkeeping every track's run needs, done here once instead of in each `prepare`: the
    tasks filed in the store (the run is scored over them, as `score RUN` scores it), each
    system's identity recorded (`PreparedSystem.config`: a resume with another configuration is
    refused in one line, another deskbench build is a warning), and what each system has done
    counted. Called before the first episode; a second call does nothing."""
    if prep.booked:
        return prep
    prep.store.save_tasks(_task_models(prep.tasks))
    for key, value in prep.meta.items():  # where the tasks came from
        prep.store.set_meta(key, value)
    for s in prep.systems:
        warning = remember_config(prep.store, s.name, s.config) if s.config is not None else None
        if warning and warning not in prep.warnings:
            prep.warnings.append(warning)
    asked = wanted(prep.tasks, prep.attempts)
    for s in prep.systems:
        s.already_done = prep.done_before(s.name, asked)
    if prep.limits.any:  # a cost limit needs every price, and the run's spend so far, before any episode
        check_prices(prep.limits, ((s.model.id, s.model.prices) for s in prep.systems if s.model is not None))
        prep.budget = RunBudget.of_run(prep.store, prep.limits)
        remember_limits(prep.store, prep.limits)
    prep.booked = True
    return prep


def execute_run(prep: PreparedRun, on_episode: Callable[[str, RunCounts], None] | None = None) -> list[Outcome]:
    """Every system of the run at once, each `concurrency` episodes at a time; every model is
    closed at the end, whatever happened."""
    ready(prep)

    async def go() -> list[RunCounts]:
        try:
            async with prep.start() as episodes:
                def report(name: str) -> Callable[[RunCounts], None] | None:
                    return (lambda c: on_episode(name, c)) if on_episode else None

                return list(await asyncio.gather(*(
                    run_attempts(prep.tasks, episodes[s.name], prep.store, s.name, attempts=prep.attempts,
                                 concurrency=prep.concurrency, on_episode=report(s.name), replace=prep.replace,
                                 retry_errors=prep.retry_errors, budget=prep.budget)
                    for s in prep.systems)))
        finally:
            for model in {id(s.model): s.model for s in prep.systems if s.model is not None}.values():
                await model.aclose()

    counts = asyncio.run(go())
    return [Outcome(system=s.name, counts=c, ledger=s.model.ledger if s.model else None)
            for s, c in zip(prep.systems, counts, strict=True)]
