"""deliverables' tools over MCP: what the built-in deliverable agent has (tracks/deliverables/
agent.py), mapped so the stored episode is the one the scorer reads from that agent: read_input
(an input file's normalised text, as the agent's prompt inlines it; free, like the prompt),
execute_code (the sandbox with the package's inputs at /mnt/data; what the code saves to
/mnt/result are the deliverable files), web_search and fetch when the run has --web (the same
tools over the same backend), and submit_deliverable (the response text, the agent's final
reply). Every call but read_input and the submission counts against --max-rounds; past it the
agent is told to submit, as the built-in agent is. `deskbench mcp --tasks PACKAGES` serves them for
one package outside a run, without the web (Track.mcp_tools: `DeliverablesMcpTools`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from deskbench.agents.base import AgentResult
from deskbench.agents.code_loop import AnalystContext, execute_tool
from deskbench.contract.mcp import McpRequest, McpTools
from deskbench.errors import UserError
from deskbench.mcp.code_session import CodeSession, ToolError
from deskbench.mcp.external import ExternalRunner, Status
from deskbench.mcp.server import McpTool, SessionSource
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.deliverables.agent_inputs import (
    DeliverableOptions,
    files_block,
    inline_inputs,
)
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask
from deskbench.tracks.deliverables.web_access import FETCH_TOOL, SEARCH_TOOL, web_tools
from deskbench.tracks.deliverables.web_backend import WebBackend

if TYPE_CHECKING:
    from deskbench.mcp.standalone import TaskServed
    from deskbench.runs.store import RunStore

SERVER_NAME = "deskbench-deliverables"
READ_DESCRIPTION = ("An input file's contents normalised to text (spreadsheets as annotated TSV, docx/pptx/pdf as "
                    "text), by its name under /mnt/data; long files are cut (read the rest with execute_code).")
SUBMIT_DESCRIPTION = ("Submit the deliverable: `response` is the deliverable itself, in markdown; the output files "
                      "are the ones execute_code saved under /mnt/result. Ends the episode.")
HOW_TO_WORK = """HOW TO WORK
- read_input gives an input file's text; execute_code runs a fresh Python process (write complete code with its
  imports) with the files read-only under /mnt/data/. {budget}
{web_lines}- Save every required output file under /mnt/result/ with exactly the name the task gives.
- When you are done, call submit_deliverable with the deliverable itself, in markdown."""


class DeliverablesSession(CodeSession):
    answer_tool = "submit_deliverable"

    def __init__(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path, options: DeliverableOptions,
                 web: WebBackend | None) -> None:
        super().__init__(ctx, task.input_paths(), workdir, tools=web_tools(web) if web is not None else ())
        self.task, self.options = task, options

    async def read_input(self, name: str) -> str:
        self._open()
        path = next((p for p in self.inputs if p.name == name.removeprefix("/mnt/data/")), None)
        if path is None:
            raise ToolError(f"no input file {name!r}; the inputs are: {', '.join(p.name for p in self.inputs)}")
        started = time.monotonic()
        text = inline_inputs([path], self.options.inline_chars)
        self.rec.add(ToolCallStep(name="read_input", arguments={"name": path.name}, result={"chars": len(text)},
                                  seconds=round(time.monotonic() - started, 4)), detail={"text": text})
        return text

    def result(self, status: Status = "ok", error: str | None = None) -> AgentResult:
        status, stop, error = self.ending(status, error)
        sub = DeliverableSubmission(id=self.task.id, response=self.answer or "", files=self.files.records(),
                                    files_dir=self.files_dir, rounds=self.rounds, stop=stop)
        return self.rec.result(status, sub, error=error)


def question(task: DeliverableTask, ctx: AnalystContext, web: bool) -> str:
    """The deliverable agent's prompt with its tool mechanics for MCP: the task, the files (not
    inlined: read_input gives them), how to work and how to submit."""
    from deskbench.tracks.deliverables.prompts import BUDGET, WEB_BUDGET, WEB_LINES

    budget = (WEB_BUDGET if web else BUDGET).format(max_rounds=ctx.settings.max_rounds)
    return (f"THE TASK\n{task.full_prompt}\n\n{files_block(task, task.input_paths(), inline_chars=0)}\n"
            + HOW_TO_WORK.format(budget=budget, web_lines=WEB_LINES if web else ""))


def deliverables_tools(source: SessionSource[DeliverablesSession], *, web: bool) -> list[McpTool]:
    async def read_input(name: str) -> str:
        return await source.current().read_input(name)

    async def execute_code(code: str) -> str:
        return await source.current().execute_code(code)

    async def web_search(query: str, count: int = 5) -> str:
        return await source.current().loop_tool(SEARCH_TOOL.name, {"query": query, "count": count})

    async def fetch(url: str) -> str:
        return await source.current().loop_tool(FETCH_TOOL.name, {"url": url})

    async def submit_deliverable(response: str) -> str:
        session = source.current()
        reply = session.finish(response, response=response)
        await source.answered(session)
        return reply

    tools = [McpTool(read_input, READ_DESCRIPTION), McpTool(execute_code, execute_tool(False).description)]
    if web:
        tools += [McpTool(web_search, SEARCH_TOOL.description), McpTool(fetch, FETCH_TOOL.description)]
    return [*tools, McpTool(submit_deliverable, SUBMIT_DESCRIPTION)]


def served(packages: Path, store: RunStore, wanted: str | None, max_rounds: int = 20) -> TaskServed[DeliverablesSession]:
    """`deskbench mcp --tasks PACKAGES [--task ID]`: one package's tools, outside a run (no web)."""
    from deskbench.agents.code_loop import AnalystSettings
    from deskbench.mcp.standalone import TaskServed, pick
    from deskbench.sandbox import Limits, Sandbox
    from deskbench.tracks.deliverables.tasks import load_packages

    items = load_packages(packages)
    task = {t.id: t for t in items}[pick([t.id for t in items], wanted, packages)]
    missing = [str(p) for p in task.input_paths() if not p.is_file()]
    if missing:
        raise UserError(f"package {task.id}: input file not found: {missing[0]}")
    ctx = AnalystContext(model=None, sandbox=Sandbox(Limits()), tasks_dir=packages.resolve(),
                         run_dir=store.dir, settings=AnalystSettings(summary=False, max_rounds=max_rounds))
    store.save_tasks(items)
    store.set_meta("packages", str(packages.resolve()))
    options = DeliverableOptions()
    return TaskServed(store, task.id, SERVER_NAME, question(task, ctx, web=False),
                      lambda source: deliverables_tools(source, web=False),
                      lambda workdir: DeliverablesSession(task, ctx, workdir, options, None))


class DeliverablesMcpTools(McpTools):
    """`deskbench mcp --tasks PACKAGES [--task ID]`: the deliverable agent's tools for one package."""

    serves_tasks: ClassVar[bool] = True

    def tasks(self, request: McpRequest) -> TaskServed[DeliverablesSession]:
        return served(request.source, request.store, request.task, request.max_rounds)


class ExternalDeliverablesAgent(ExternalRunner):
    """`--agent external` on deliverables packages: built with the run's options and open web
    backend, as the built-in agent is."""

    def __init__(self, options: DeliverableOptions, web: WebBackend | None) -> None:
        super().__init__()
        self.options, self.web = options, web
        self.configure(options.agent_options)

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        from deskbench.mcp.server import OneEpisode

        if (missing := task.missing_input()) is not None:
            return AgentResult(status="error", error=missing)
        session = DeliverablesSession(task, ctx, workdir, self.options, self.web)
        tools = deliverables_tools(OneEpisode(session), web=self.web is not None)
        return await self.episode(session, tools, server_name=SERVER_NAME,
                                  question=question(task, ctx, self.web is not None), task_id=task.id)
