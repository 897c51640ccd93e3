"""One system (agent x model) over a task list into a run directory: what `deskbench run` and
`deskbench demo` both do. Validates the settings, builds the model inside its retry/cache/usage
wrapper (which checks its key and settings), opens the store, runs the episodes in one event
loop and closes the model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.agents.base import AgentContext, AgentSettings
from deskbench.agents.registry import NEEDS_CORPUS, NEEDS_SANDBOX, NO_MODEL, make_agent
from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.models.registry import open_model
from deskbench.models.resilient import ResilientModel, UsageLedger
from deskbench.models.settings import ResolvedSettings, Sampling
from deskbench.runs.runner import RunCounts, run_episodes, system_name
from deskbench.runs.settings import remember_settings
from deskbench.runs.store import RunStore
from deskbench.tasks.docqa import DocQATask

if TYPE_CHECKING:
    from deskbench.sandbox import Sandbox


@dataclass(frozen=True)
class RunSpec:
    agent: str
    model: str | None  # ignored by agents that call no model
    out: Path
    corpus: Path | None = None
    concurrency: int = 16
    max_steps: int | None = None  # None: the agent's own (bm25-agent 10, rlm 30)
    top_k: int = 5
    view: str | None = None  # image, text, or None: image unless the model reads text only
    sampling: Sampling = Sampling()
    cache: bool = False
    prices: Path | None = None
    unsafe_local: bool = False  # rlm: run the REPL without bubblewrap (debugging only)
    max_sub_calls: int | None = None  # rlm: llm_query calls per episode; None: no cap
    attempts: int = 1  # episodes per task (pass@k, avg@k); attempt 0 is the one MADQA's metrics read

    def check(self) -> None:
        if self.view not in (None, "image", "text"):
            raise UserError(f"--view {self.view!r} is not valid; use image or text")
        for flag, value in (("--attempts", self.attempts), ("--concurrency", self.concurrency),
                            ("--max-steps", self.max_steps),
                            ("--top-k", self.top_k), ("--max-sub-calls", self.max_sub_calls)):
            if value is not None and value < 1:
                raise UserError(f"{flag} {value} is not valid; use 1 or more")
        make_agent(self.agent)  # names the choices when unknown
        if self.agent in NEEDS_CORPUS and self.corpus is None:
            raise UserError(f"--agent {self.agent} searches documents: give --corpus DIR (from deskbench ingest)")
        if self.agent not in NO_MODEL and not self.model:
            raise UserError(f"--agent {self.agent} calls a model: give --model (e.g. local, openai/gpt-5-mini)")


@dataclass
class Prepared:
    """A run ready to go: the progress bar needs its name and how much is already done."""

    spec: RunSpec
    tasks: list[DocQATask]
    store: RunStore
    system: str
    already_done: int
    model: ResilientModel | None
    view: str = "image"  # what the agent shows the model
    warnings: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.tasks) * self.spec.attempts


@dataclass
class Outcome:
    system: str
    counts: RunCounts
    ledger: UsageLedger | None


SHOWS_PAGES = {"bm25-agent", "rag", "oracle"}  # the docqa agents that put pages in front of the model


def choose_view(spec: RunSpec, settings: ResolvedSettings | None) -> tuple[str, list[str]]:
    """The view the agent uses, and a warning when it is not the one asked for by default: page
    images to a model that reads text only would be dropped (or refused) on every call."""
    if spec.agent not in SHOWS_PAGES or settings is None or settings.vision:
        return spec.view or "image", []
    if spec.view == "image":
        raise UserError(f"--view image: {settings.model} reads text only (no vision, per deskbench's capability "
                        "table); use --view text, or give --capabilities FILE if the model does take images")
    if spec.view is None:
        return "text", [f"{settings.model} reads text only: pages are shown as text (--view text)"]
    return spec.view, []


def prepare(spec: RunSpec, tasks: Sequence[DocQATask], *, tasks_file: str | None = None) -> Prepared:
    """Open the run over `tasks` (kept with the run, which is scored over them) and its model.
    The model comes first: a missing key or a refused setting stops before anything is created."""
    spec.check()
    model = None
    if spec.agent not in NO_MODEL:
        assert spec.model is not None
        model = open_model(spec.model, sampling=spec.sampling, concurrency=spec.concurrency, cache=spec.cache,
                           prices=spec.prices)
    view, warnings = choose_view(spec, model.settings if model else None)
    store = RunStore(spec.out)
    store.save_tasks(tasks)
    if tasks_file is not None:
        store.set_meta("tasks_file", tasks_file)
    system = system_name(spec.agent, model.id) if model else spec.agent
    if model is not None:
        remember_settings(store, system, model)
    ids = {(t.id, a) for t in tasks for a in range(spec.attempts)}
    return Prepared(spec=spec, tasks=list(tasks), store=store, system=system,
                    already_done=len(store.done(system) & ids), model=model, view=view, warnings=warnings)


def rlm_sandbox(unsafe_local: bool) -> Sandbox:
    """The jail of the rlm agent's REPL. One process lives for a whole episode, so its CPU
    rlimit (a lifetime total, not per execution) is larger than execute_code's 60 s; the wall
    time stays the limit of one execution."""
    from deskbench.sandbox import Limits, Sandbox

    return Sandbox(Limits(cpu_seconds=600), unsafe_local=unsafe_local)


def execute(prep: Prepared, on_episode: Callable[[RunCounts], None] | None = None) -> Outcome:
    spec = prep.spec
    ctx = AgentContext(
        model=prep.model,
        corpus=Corpus.open(spec.corpus) if spec.corpus else None,
        settings=AgentSettings(max_steps=spec.max_steps, top_k=spec.top_k, view=prep.view,  # type: ignore[arg-type]
                               max_sub_calls=spec.max_sub_calls),
        sandbox=rlm_sandbox(spec.unsafe_local) if spec.agent in NEEDS_SANDBOX else None,
    )

    async def go() -> RunCounts:
        try:
            return await run_episodes(prep.tasks, make_agent(spec.agent), ctx, prep.store, prep.system,
                                      attempts=spec.attempts, concurrency=spec.concurrency, on_episode=on_episode)
        finally:
            if prep.model is not None:
                await prep.model.aclose()

    counts = asyncio.run(go())
    return Outcome(system=prep.system, counts=counts, ledger=prep.model.ledger if prep.model else None)
