"""Deliverables runs: several (agent, model) systems on the same task packages at once.

The paper's dispatcher sends every agent the identical packages simultaneously and merges each
result into one store as it lands (§3.4, Appendix D). Here every system's episodes run
concurrently into the run's SQLite store; a rerun of named tasks or systems (`rerun`) replaces
just those episodes, each in one transaction when its new version ends, and leaves every other
episode as it was. An episode's output files live under RUNDIR/outputs/<system>/<task>/<attempt>/.

`--trap-hints` and `--web` make a variant of the agent: its system name says so
(`deliverable-agent[trap-hints]:MODEL`) and its protocol notes are kept with the run, so a variant
and the paper's setting can share a run and every table tells them apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from deskbench.agents.base import AgentResult, stamped
from deskbench.agents.code_loop import AnalystContext, AnalystSettings
from deskbench.errors import UserError
from deskbench.models.registry import open_model, preflight
from deskbench.models.resilient import ResilientModel
from deskbench.models.settings import Sampling
from deskbench.requirements import check_agent as check_needs
from deskbench.runs.identity import (
    SystemConfig,
    model_settings,
    model_source,
    prompt_hash,
)
from deskbench.runs.protocol import ProtocolNote, remember_protocol
from deskbench.runs.runner import EpisodeFn, HasId, episode_dir, system_name
from deskbench.runs.settings import remember_settings
from deskbench.runs.store import RunStore
from deskbench.runs.track import PreparedRun, PreparedSystem
from deskbench.sandbox import Limits, Sandbox
from deskbench.tracks.deliverables import deep_research
from deskbench.tracks.deliverables.agent import (
    DELIVERABLE_AGENTS,
    NO_MODEL,
    DeliverablesAgent,
    check_agent,
    make_agent,
    protocol_notes,
    variant_name,
)
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions
from deskbench.tracks.deliverables.tasks import DeliverableTask, load_packages
from deskbench.tracks.deliverables.web_access import WebChoice, open_web
from deskbench.tracks.deliverables.web_deny import DenyList, flag_sources, no_peeking_note


@dataclass(frozen=True)
class SystemSpec:
    agent: str
    model: str


def pair_systems(agents: Sequence[str], models: Sequence[str]) -> list[SystemSpec]:
    """`--agent`/`--model` pairs in order; one agent with several models (or the reverse) is
    paired with each. Anything else is ambiguous and refused."""
    if not agents or not models:
        raise UserError("give at least one --agent and one --model")
    if len(agents) == 1:
        agents = list(agents) * len(models)
    elif len(models) == 1:
        models = list(models) * len(agents)
    if len(agents) != len(models):
        raise UserError(f"{len(agents)} --agent and {len(models)} --model options do not pair up; give one "
                        "--model per --agent (in order), or one agent with several models")
    systems = [SystemSpec(a, m) for a, m in zip(agents, models, strict=True)]
    for s in systems:
        check_agent(s.agent)  # a built-in or a plugin's
    if len(set(systems)) != len(systems):
        raise UserError("the same --agent/--model pair is given twice; give each system once")
    return systems


@dataclass(frozen=True)
class DeliverablesRunSpec:
    systems: tuple[SystemSpec, ...]
    packages: Path
    out: Path
    only_tasks: tuple[str, ...] = ()
    only_systems: tuple[str, ...] = ()  # names as stored ("agent:model"), for reruns
    rerun: bool = False
    attempts: int = 1
    concurrency: int = 2  # episodes in flight per system
    max_rounds: int = 20
    sampling: Sampling = field(default_factory=Sampling)
    inline_chars: int = 24_000
    cache: bool = False
    prices: Path | None = None
    unsafe_local: bool = False
    limits: Limits = field(default_factory=Limits)
    trap_hints: bool = False  # the prompt names the trap kinds (not the paper's prompt)
    web: WebChoice | None = None  # web_search/fetch tools (none: no web access)
    deny: DenyList | None = field(default_factory=DenyList.default)  # no peeking (web_deny.py); None: --allow-peeking
    agent_options: Mapping[str, object] = field(default_factory=dict)  # external: --command / --url / --timeout

    @property
    def options(self) -> DeliverableOptions:
        return DeliverableOptions(inline_chars=self.inline_chars, trap_hints=self.trap_hints, web=self.web,
                                  deny=self.deny, agent_options=self.agent_options)

    def has_web(self, agent: str) -> bool:
        """Whether the agent can reach the web: deskbench's tools (--web) or its provider's own search."""
        return self.web is not None or agent in deep_research.AGENTS

    def system(self, agent: str, model_id: str | None) -> str:
        """The stored system name: the agent's variant and the model (none for an agent calling no model of ours)."""
        variant = variant_name(agent, self.options)
        return system_name(variant, model_id) if model_id else variant

    def check(self) -> None:
        for flag, value in (("--attempts", self.attempts), ("--concurrency", self.concurrency),
                            ("--max-rounds", self.max_rounds)):
            if value < 1:
                raise UserError(f"{flag} {value} is not valid; use 1 or more")
        if self.inline_chars < 0:
            raise UserError(f"--inline-chars {self.inline_chars} is not valid; use 0 or more")
        for s in self.systems:  # external: its --command / --url are checked before anything starts
            if s.agent in NO_MODEL:
                check_needs(s.agent, DELIVERABLE_AGENTS[s.agent](self.options, None))


def select_tasks(all_tasks: list[DeliverableTask], only: Sequence[str]) -> list[DeliverableTask]:
    if not only:
        return all_tasks
    known = {t.id for t in all_tasks}
    unknown = [i for i in only if i not in known]
    if unknown:
        raise UserError(f"--task {unknown[0]!r} is not a package here; known ids: {', '.join(sorted(known))}")
    return [t for t in all_tasks if t.id in set(only)]


# where the deliverable agent's prompt, its execute_code and web tool descriptions come from
PROMPT_MODULES = ("deskbench.tracks.deliverables.prompts", "deskbench.agents.code_loop",
                  "deskbench.tracks.deliverables.web_access")


def deliverables_config(spec: DeliverablesRunSpec, agent: str, model: ResilientModel | None) -> SystemConfig:
    """A deliverables system's configuration (runs/identity.py); where --web records to is not.
    An external agent's command is part of what its system is."""
    web = {"kind": spec.web.kind, "arg": spec.web.arg} if spec.web is not None else None
    return SystemConfig(track="deliverables", agent=agent, model=model.id if model else None,
                        model_settings=model_settings(model), model_source=model_source(model),
                        settings={"max_rounds": spec.max_rounds, "inline_chars": spec.inline_chars,
                                  "trap_hints": spec.trap_hints, "web": web,
                                  **({"deny_list": spec.deny.digest() if spec.deny else "off"} if spec.has_web(agent) else {}),
                                  **(spec.agent_options if agent in NO_MODEL else {})},
                        prompt_hash=prompt_hash(*PROMPT_MODULES, *agent_modules(agent)))


def agent_modules(agent: str) -> tuple[str, ...]:
    """A deep-research agent's own prompt lines (deep_research/<provider>.py) are part of its identity."""
    return (deep_research.module_name(agent),) if agent in deep_research.AGENTS else ()


def agent_protocol(agent: str, options: DeliverableOptions, *, external: bool) -> list[ProtocolNote]:
    """What the system runs: a deep-research agent says its provider's API and web access, the
    others the deliverable agent's prompt and --web."""
    notes = deep_research.protocol_notes(agent, options) if agent in deep_research.AGENTS else \
        protocol_notes(options, external=external)
    if options.web is not None or agent in deep_research.AGENTS:
        notes.append(no_peeking_note(options.deny, agent if options.web is None else None))
    return notes


def prepare_deliverables(spec: DeliverablesRunSpec) -> PreparedRun:
    """Every system on the packages at once (each system's episodes `concurrency` at a time); one
    server / client per model, shared by its systems; one web backend shared by every system."""
    spec.check()
    all_tasks = load_packages(spec.packages)
    tasks = select_tasks(all_tasks, spec.only_tasks)
    sandbox = Sandbox(spec.limits, unsafe_local=spec.unsafe_local)  # refuses early without bubblewrap
    for s in spec.systems:  # every model's key and settings before anything is created
        if s.agent not in NO_MODEL:
            preflight(s.model, spec.sampling)
    store = RunStore(spec.out)  # the runner files the packages run (--task), records identities, counts what is done
    models: dict[str, ResilientModel] = {}
    by_name: dict[str, ResilientModel | None] = {}  # system name -> its model (None: an agent calling none of ours)
    agents: dict[str, str] = {}  # system name -> agent
    configs: dict[str, SystemConfig] = {}  # system name -> its identity, recorded by the runner (runs/track.py ready)
    for s in spec.systems:
        if s.model not in models and s.agent not in NO_MODEL:
            models[s.model] = open_model(s.model, sampling=spec.sampling, concurrency=spec.concurrency * len(spec.systems),
                                         cache=spec.cache, prices=spec.prices)
        model = models.get(s.model) if s.agent not in NO_MODEL else None
        name = spec.system(s.agent, model.id if model else None)
        by_name[name] = model
        if model is not None:
            remember_settings(store, name, model)
        remember_protocol(store, name, agent_protocol(s.agent, spec.options, external=model is None))
        if not spec.only_systems or name in spec.only_systems:
            agents[name] = s.agent
            configs[name] = deliverables_config(spec, s.agent, model)
    if spec.only_systems and not agents:
        raise UserError(f"--system {spec.only_systems[0]!r} matches none of the systems given "
                        f"({', '.join(by_name)})")
    settings = AnalystSettings(max_rounds=spec.max_rounds, summary=False)

    @asynccontextmanager
    async def start() -> AsyncIterator[dict[str, EpisodeFn]]:
        web = open_web(spec.web, spec.deny) if spec.web is not None else None
        try:
            yield {name: _episodes(make_agent(agent, spec.options, web), name, prep, spec.deny if spec.has_web(agent) else None,
                                   AnalystContext(model=by_name[name], sandbox=sandbox, tasks_dir=spec.packages.resolve(),
                                                  run_dir=store.dir, settings=settings))
                   for name, agent in agents.items()}
        finally:
            if web is not None:
                await web.aclose()

    prep = PreparedRun(track="deliverables", store=store, tasks=tasks, systems=[], start=start,
                       attempts=spec.attempts, concurrency=spec.concurrency, replace=spec.rerun,
                       meta={"packages": str(spec.packages.resolve())})
    prep.systems += [PreparedSystem(name=name, model=by_name[name], config=configs[name]) for name in agents]
    return prep


def _episodes(agent: DeliverablesAgent, system: str, prep: PreparedRun, deny: DenyList | None,
              ctx: AnalystContext) -> EpisodeFn:
    """`deny`: after the episode, the denied sources its steps show it got (a provider's own
    search, which deskbench could not filter) are named in a `peeking` step (web_deny.py)."""
    async def episode(task: HasId, attempt: int) -> AgentResult:
        assert isinstance(task, DeliverableTask)
        result = await agent.run(task, ctx, episode_dir(prep.store.dir, system, task.id, attempt))
        response = getattr(result.submission, "response", None)
        flagged = flag_sources(result.trajectory, deny, system, response if isinstance(response, str) else "") \
            if deny is not None else None
        if flagged is not None:
            result.trajectory.append(stamped(flagged))
        return result

    return episode
