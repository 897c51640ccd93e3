"""One analytics system (code agent x model) over an analytics task file into a run directory.

Every (task, attempt) is an episode: pass@k needs k attempts of each task (`--attempts 3` for the
paper's pass@3 and avg@3). An episode's output files live under
`RUNDIR/outputs/<system>/<task>/<attempt>/result/`; a cut-short episode's folder is cleared when
it runs again, so a resumed run never mixes two attempts' files.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from deskbench.agents.base import AgentResult
from deskbench.agents.code_loop import AnalystContext, AnalystSettings
from deskbench.errors import UserError
from deskbench.models.registry import open_model
from deskbench.models.settings import PRESET_FIELDS, ResolvedSettings, Sampling
from deskbench.runs.identity import (
    SystemConfig,
    model_settings,
    model_source,
    prompt_hash,
)
from deskbench.runs.protocol import ProtocolNote, deskbench, paper, remember_protocol
from deskbench.runs.runner import EpisodeFn, HasId, episode_dir, system_name
from deskbench.runs.settings import remember_settings
from deskbench.runs.store import RunStore
from deskbench.runs.track import PreparedRun, PreparedSystem
from deskbench.sandbox import Limits, Sandbox
from deskbench.tracks.analytics.agent import AnalyticsAgent, make_agent, needs_model
from deskbench.tracks.analytics.tasks import AnalyticsTask, check_inputs

PAPER_ROUNDS = 20  # §4.1: at most 20 execute_code invocations per instance
PAPER_DECODING = "aida"  # the decoding preset of models/decoding.toml that is Appendix E, Table 3


@dataclass(frozen=True)
class AnalyticsRunSpec:
    agent: str
    model: str
    out: Path
    tasks_file: Path
    attempts: int = 1
    concurrency: int = 4  # each episode runs code: the sandbox, not the model, is the bottleneck
    max_rounds: int = 20
    summary: bool = True
    last_round_note: bool = False  # deskbench addition (--last-round-note)
    cjk_font_hint: bool = False  # deskbench addition (--cjk-font-hint)
    sampling: Sampling = Sampling()
    cache: bool = False
    prices: Path | None = None
    unsafe_local: bool = False
    limits: Limits = Limits()
    agent_options: Mapping[str, object] = field(default_factory=dict)  # external: --command / --url / --timeout

    def check(self) -> AnalyticsAgent:
        """The agent, once every flag is checked (its own options too)."""
        agent = make_agent(self.agent, self.agent_options)
        for flag, value in (("--attempts", self.attempts), ("--concurrency", self.concurrency),
                            ("--max-rounds", self.max_rounds)):
            if value < 1:
                raise UserError(f"{flag} {value} is not valid; use 1 or more")
        if needs_model(agent) and not self.model:
            raise UserError(f"--agent {self.agent} calls a model: give --model (e.g. local, openai/gpt-5-mini)")
        return agent


def analytics_system(spec: AnalyticsRunSpec, model_id: str | None) -> str:
    """The system's name: the summary ablation and each deskbench addition make another system
    of the same run (`analyst-agent[no-summary,last-round-note]`), so variants live side by side
    and a number never loses which protocol produced it."""
    tags = [tag for tag, on in (("no-summary", not spec.summary), ("last-round-note", spec.last_round_note),
                                ("cjk-font-hint", spec.cjk_font_hint)) if on]
    agent = f"{spec.agent}[{','.join(tags)}]" if tags else spec.agent
    return system_name(agent, model_id) if model_id else agent  # an agent calling no model of ours: its name


def decoding_note(settings: ResolvedSettings) -> ProtocolNote:
    """How the agent's model decoded: the paper sets it per model (Appendix E, Table 3), which
    `--decoding aida` sends; a row value the model does not take (left unset) or any other
    decoding is deskbench's."""
    label = settings.sent.decoding or ""
    if label.partition(":")[0] == PAPER_DECODING:
        row = f"Table 3 row {label.partition(':')[2]}: {settings.decoding_row} (--decoding {settings.asked.decoding})"
        unsent = [d for d in settings.dropped if f"({label}: " in d]
        return deskbench("decoding", f"{row}; not sent: {'; '.join(unsent)}") if unsent else paper("decoding", row)
    sent = ", ".join(f"{k}={v}" for k in PRESET_FIELDS if (v := getattr(settings.sent, k)) is not None)
    return deskbench("decoding", f"{sent or 'the provider defaults'}, not Table 3's per-model values "
                                 f"(--decoding {PAPER_DECODING} sends them)")


def analytics_run_protocol(spec: AnalyticsRunSpec, model: bool = True,
                           settings: ResolvedSettings | None = None) -> list[ProtocolNote]:
    """The run-side protocol of an analytics system (kept with the run by remember_protocol);
    `model` False: an agent of its own (external) got the task prompt, not Listing 1. `settings`:
    the agent's model's, for how it decoded (none: an external agent's own model)."""
    return [
        paper("agent prompt", "Listing 1 task-execution prompt with one execute_code tool") if model else
        deskbench("agent prompt", "the agent's own: it got the task prompt (instruction, files, summary) and "
                  "execute_code and provide_answer over MCP (--agent external)"),
        paper("round budget", "20 execute_code calls") if spec.max_rounds == PAPER_ROUNDS
        else deskbench("round budget", f"{spec.max_rounds} execute_code calls (--max-rounds; the paper's is 20)"),
        paper("auxiliary summary", "on: Appendix F summary in the prompt" if spec.summary
              else "off: the Table 2 ablation (--no-summary)"),
        deskbench("round-limit note", "the last call's result says to answer now (--last-round-note)")
        if spec.last_round_note else paper("round-limit note", "none: a model still calling tools at the limit "
                                                               "ends the episode (the paper's exception)"),
        deskbench("CJK font hint", "the tool description names the installed CJK fonts (--cjk-font-hint)")
        if spec.cjk_font_hint else paper("CJK font hint", "none: fonts installed, not mentioned to the model"),
        *([decoding_note(settings)] if settings is not None else []),
    ]


# where the analyst agent's prompt (Listing 1) and its execute_code tool description come from
PROMPT_MODULES = ("deskbench.tracks.analytics.prompts", "deskbench.agents.code_loop")


def prepare_analytics(spec: AnalyticsRunSpec, tasks: Sequence[AnalyticsTask]) -> PreparedRun:
    agent = spec.check()
    tasks_dir = spec.tasks_file.resolve().parent
    for task in tasks:  # a missing input is the task file's fault: say so before any work
        try:
            check_inputs(task, tasks_dir)
        except ValueError as exc:
            raise UserError(f"{spec.tasks_file}: {exc}; input paths are relative to the tasks file's folder") from None
    sandbox = Sandbox(spec.limits, unsafe_local=spec.unsafe_local)  # refuses early without bubblewrap
    model = open_model(spec.model, sampling=spec.sampling, concurrency=spec.concurrency, cache=spec.cache,
                       prices=spec.prices) if needs_model(agent) else None  # the key and settings before anything is created
    store = RunStore(spec.out)  # the runner files the tasks, records the system's identity, counts what is done
    system = analytics_system(spec, model.id if model else None)
    if model is not None:
        remember_settings(store, system, model)
    remember_protocol(store, system, analytics_run_protocol(spec, model is not None,
                                                            model.settings if model is not None else None))
    config = SystemConfig(track="analytics", agent=spec.agent, model=model.id if model else None,
                          model_settings=model_settings(model), model_source=model_source(model),
                          settings={"max_rounds": spec.max_rounds, "summary": spec.summary,
                                    "last_round_note": spec.last_round_note, "cjk_font_hint": spec.cjk_font_hint,
                                    **spec.agent_options},  # external: the command is part of what the system is
                          prompt_hash=prompt_hash(*PROMPT_MODULES))

    @asynccontextmanager
    async def start() -> AsyncIterator[dict[str, EpisodeFn]]:
        ctx = AnalystContext(
            model=model, sandbox=sandbox, tasks_dir=tasks_dir, run_dir=store.dir,  # None: external
            settings=AnalystSettings(max_rounds=spec.max_rounds, summary=spec.summary,
                                     last_round_note=spec.last_round_note, cjk_font_hint=spec.cjk_font_hint),
        )

        async def episode(task: HasId, attempt: int) -> AgentResult:
            assert isinstance(task, AnalyticsTask)
            return await agent.run(task, ctx, episode_dir(store.dir, system, task.id, attempt))

        yield {system: episode}

    prep = PreparedRun(track="analytics", store=store, tasks=list(tasks), systems=[], start=start,
                       attempts=spec.attempts, concurrency=spec.concurrency,
                       meta={"tasks_file": str(spec.tasks_file.resolve())})
    prep.systems.append(PreparedSystem(name=system, model=model, config=config))
    return prep
