"""The deliverables agent (`deliverable-agent`): the analyst agent's execute_code loop with a
deliverable-writing prompt, the package's input files mounted in the sandbox and its required
output files collected from /mnt/result (issue 7 item 7).

Two options change what is measured, so each is in the system's name and in the run's protocol
notes (runs/protocol.py): `trap_hints` (the prompt names the trap kinds; not the paper's prompt)
and `web` (web_search and fetch tools, tracks/deliverables/web_access.py; the paper's agents had the web).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from deskbench.agents.base import AgentResult, Recorder
from deskbench.agents.code_loop import AnalystContext, Deliverables, code_loop
from deskbench.errors import UserError
from deskbench.runs.protocol import ProtocolNote, deskbench, paper
from deskbench.tracks.deliverables import deep_research
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions, files_block
from deskbench.tracks.deliverables.prompts import (
    BUDGET,
    DELIVERABLE_PROMPT,
    FINAL_NOTE,
    FINAL_WORDS,
    TRAP_CLOSING,
    TRAP_HINTS,
    TRAP_PREAMBLE,
    WEB_BUDGET,
    WEB_LINES,
)
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask
from deskbench.tracks.deliverables.web_access import web_tools
from deskbench.tracks.deliverables.web_backend import WebBackend, WebUnavailable


@runtime_checkable  # a plugin's agent is checked against it (make_agent)
class DeliverablesAgent(Protocol):
    name: str

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult: ...


def deliverable_prompt(task: DeliverableTask, inputs: list[Path], *, max_rounds: int, inline_chars: int,
                       trap_hints: bool = False, web: bool = False) -> str:
    """The paper's prompt (discipline line + SME prompt) and the harness's mechanics; with
    `trap_hints` the trap kinds are named; with `web` the web tools are described."""
    return DELIVERABLE_PROMPT.format(
        preamble=TRAP_PREAMBLE.format(hints=", ".join(TRAP_HINTS.values())) if trap_hints else "",
        task_prompt=task.full_prompt, files_block=files_block(task, inputs, inline_chars),
        budget=(WEB_BUDGET if web else BUDGET).format(max_rounds=max_rounds),
        web_lines=WEB_LINES if web else "", closing=TRAP_CLOSING if trap_hints else "")


def variant_name(agent: str, options: DeliverableOptions) -> str:
    """The agent's name with its non-default options, e.g. `deliverable-agent[trap-hints,web-brave]`:
    every table shows the variant, and two variants are two systems of one run."""
    parts = (["trap-hints"] if options.trap_hints else []) + ([f"web-{options.web.kind}"] if options.web else [])
    return f"{agent}[{','.join(parts)}]" if parts else agent


def protocol_notes(options: DeliverableOptions, *, external: bool = False) -> list[ProtocolNote]:
    """The run-side protocol of a deliverables system, kept with the run (runs/protocol.py)."""
    prompt = (deskbench("agent prompt", "the agent's own: it got the task, its files and the deliverable agent's "
                        "tools over MCP (--agent external)") if external else
              deskbench("agent prompt", "trap hints (--trap-hints): the prompt names the trap kinds")
              if options.trap_hints else
              paper("agent prompt", "§3.2: corpus-discipline line + SME prompt, and the harness's tool mechanics"))
    if options.web is None:
        web = deskbench("web access", "none (no --web): FSP and hybrid CRP tasks that need live sources "
                        "cannot be solved as the paper's agents could (§3.4, Table 5)")
    elif options.web.live:
        web = paper("web access", f"§3.4, Table 5: {options.web.describe()}")
    else:
        web = deskbench("web access", options.web.describe())
    return [prompt, web]


class DeliverableAgent:
    name = "deliverable-agent"

    def __init__(self, options: DeliverableOptions | None = None, web: WebBackend | None = None) -> None:
        """`web`: the open backend of `options.web` (the run opens and closes it)."""
        self.options = options or DeliverableOptions()
        self.inline_chars = self.options.inline_chars
        if (web is None) != (self.options.web is None):
            raise ValueError("a web backend is given exactly when options.web is set")
        self.web = web

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        rec = Recorder(ctx.model)
        if (missing := task.missing_input()) is not None:
            return rec.result("error", error=missing)
        inputs = task.input_paths()
        files = Deliverables(workdir)
        web = self.web is not None
        prompt = deliverable_prompt(task, inputs, max_rounds=ctx.settings.max_rounds,
                                    inline_chars=self.inline_chars, trap_hints=self.options.trap_hints, web=web)
        note = FINAL_NOTE.format(max_rounds=ctx.settings.max_rounds, **FINAL_WORDS[web])
        try:
            end = await code_loop(prompt, inputs, ctx, files, rec, final_note=note,
                                  tools=web_tools(self.web) if self.web is not None else ())
        except WebUnavailable as exc:
            return rec.result("error", error=f"web access failed: {exc}")
        sub = DeliverableSubmission(
            id=task.id, response=end.answer, files=files.records(),
            files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=end.rounds, stop=end.stop)
        return rec.result(end.status, sub, error=end.error)


def _external(options: DeliverableOptions, web: WebBackend | None) -> DeliverablesAgent:
    """An agent built elsewhere, given the deliverable agent's tools over MCP (mcp_tools.py;
    the mcp extra is loaded only when it is asked for, and said missing in one line)."""
    from deskbench.requirements import MCP, check

    check("--agent external", [MCP])
    from deskbench.tracks.deliverables.mcp_tools import ExternalDeliverablesAgent

    return ExternalDeliverablesAgent(options, web)


NO_MODEL = {"external"}  # agents that call no model of ours: --model is ignored, no model is opened
# deliverables agents take a task package, the same context as analytics agents, and a work directory
DELIVERABLE_AGENTS: dict[str, Callable[..., DeliverablesAgent]] = {"deliverable-agent": DeliverableAgent, "external": _external}


def _deep_research(name: str) -> Callable[..., DeliverablesAgent]:
    def make(options: DeliverableOptions, web: WebBackend | None) -> DeliverablesAgent:
        made: DeliverablesAgent = deep_research.factory(name)(options, web)
        return made

    return make


DELIVERABLE_AGENTS.update({name: _deep_research(name) for name in deep_research.AGENTS})


def agent_names() -> str:
    return ", ".join(DELIVERABLE_AGENTS)


def check_agent(name: str) -> None:
    """A built-in deliverables agent or a plugin's (entry point or package.module:Name); an
    unknown name is one line, before any model is opened."""
    if name in DELIVERABLE_AGENTS:
        return
    from deskbench.agents.plugin_calls import agent_factory

    if agent_factory("deliverables", name) is None:
        raise UserError(f"unknown deliverables agent {name!r}; choose one of: {agent_names()}, "
                        "or a plugin (package.module:Name)")


def make_agent(name: str, options: DeliverableOptions, web: WebBackend | None) -> DeliverablesAgent:
    """The built-in agents are built with the run's options and open web backend; a plugin's
    class is built with no arguments and, when it has `configure(options)`, is given the same
    ({"inline_chars", "trap_hints", "web"}: the open backend or None). Either way each episode
    gets the same `AnalystContext` (model, sandbox, folders, settings) and work directory."""
    builtin = DELIVERABLE_AGENTS.get(name)
    if builtin is not None:
        return builtin(options, web)
    from deskbench.agents.plugin_calls import agent_factory

    factory = agent_factory("deliverables", name)
    if factory is None:
        raise UserError(f"unknown deliverables agent {name!r}; choose one of: {agent_names()}")
    agent = factory()
    if not isinstance(agent, DeliverablesAgent):
        raise UserError(f"agent plugin {name!r} has no `name` or no `run`: a deliverables agent is a class with "
                        "`name`, `track = \"deliverables\"` and `async run(task, ctx, workdir)` (docs/plugins.md)")
    configure = getattr(agent, "configure", None)
    if callable(configure):
        configure({"inline_chars": options.inline_chars, "trap_hints": options.trap_hints, "web": web})
    return agent
