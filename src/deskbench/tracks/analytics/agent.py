"""The AIDABench code agent (`analyst-agent`, paper §3.2 and Appendix A): Prompt A (Listing 1)
with the task, its input files at /mnt/data and, unless switched off, the auxiliary spreadsheet
summary (Appendix F), run in the shared execute_code loop (agents/code_loop.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from deskbench.agents.base import AgentResult, Recorder
from deskbench.agents.code_loop import AnalystContext, Deliverables, code_loop
from deskbench.errors import UserError
from deskbench.tracks.analytics.prompts import ANALYST_PROMPT, task_prompt
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask, check_inputs


@runtime_checkable  # a plugin's agent is checked against it (make_agent)
class AnalyticsAgent(Protocol):
    name: str

    async def run(self, task: AnalyticsTask, ctx: AnalystContext, workdir: Path) -> AgentResult: ...


class AnalystAgent:
    name = "analyst-agent"

    async def run(self, task: AnalyticsTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        settings = ctx.settings
        rec = Recorder(ctx.model)
        try:
            inputs = check_inputs(task, ctx.tasks_dir)
        except ValueError as exc:
            return rec.result("error", error=str(exc))
        files = Deliverables(workdir)
        prompt = ANALYST_PROMPT.format(task_prompt=task_prompt(task, inputs, summary=settings.summary),
                                       max_rounds=settings.max_rounds)
        end = await code_loop(prompt, inputs, ctx, files, rec)
        sub = AnalyticsSubmission(
            id=task.id, answer=end.answer, files=files.records(),
            files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=end.rounds, stop=end.stop,
            file_warnings=files.warnings)
        return rec.result(end.status, sub, error=end.error)


def _external() -> AnalyticsAgent:
    """An agent built elsewhere, given execute_code and provide_answer over MCP (mcp_tools.py;
    the mcp extra is loaded only when it is asked for, and said missing in one line)."""
    from deskbench.requirements import MCP, check

    check("--agent external", [MCP])
    from deskbench.tracks.analytics.mcp_tools import ExternalAnalyticsAgent

    return ExternalAnalyticsAgent()


# analytics agents take an analytics task, a context with the sandbox, and a work directory
ANALYTICS_AGENTS: dict[str, Callable[[], AnalyticsAgent]] = {"analyst-agent": AnalystAgent, "external": _external}


def make_agent(name: str, options: Mapping[str, object]) -> AnalyticsAgent:
    """A built-in agent, else a plugin's (`agents.plugin_calls.agent_factory`), given the run's agent options
    when it takes them (`configure`: external's --command); an unknown name is one line."""
    factory = ANALYTICS_AGENTS.get(name)
    if factory is not None:
        agent = factory()
    else:
        from deskbench.agents.plugin_calls import agent_factory

        plugin = agent_factory("analytics", name)
        if plugin is None:
            raise UserError(f"unknown analytics agent {name!r}; choose one of: {', '.join(ANALYTICS_AGENTS)}")
        built = plugin()
        if not isinstance(built, AnalyticsAgent):
            raise UserError(f"agent plugin {name!r} has no `name` or no `run`: an analytics agent is a class with "
                            "`name`, `track = \"analytics\"` and `async run(task, ctx, workdir)` (docs/plugins.md)")
        agent = built
    configure = getattr(agent, "configure", None)
    if callable(configure):
        configure(options)
    from deskbench.requirements import check_agent

    check_agent(name, agent)  # what it needs (a program, a service) before anything is created
    return agent


def needs_model(agent: AnalyticsAgent) -> bool:
    """False for agents that call no model of ours (external): --model is ignored."""
    return bool(getattr(agent, "needs_model", True))
