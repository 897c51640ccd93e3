"""analytics' tools over MCP: execute_code (the analyst agent's, code_session.py) and
provide_answer (the final answer text). The episode's submission is what the analyst agent's
would be: the answer, the files the code saved to /mnt/result (collected into the episode's
outputs folder), the execute_code calls as rounds; scored by the analytics scorer like any other.
The agent's question is the analyst's task prompt (instruction, input files, the auxiliary
summary unless --no-summary) with the last line telling it to answer with provide_answer.
`deskbench mcp --tasks FILE` serves them for one task outside a run (Track.mcp_tools:
`AnalyticsMcpTools`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from deskbench.agents.base import AgentResult
from deskbench.agents.code_loop import AnalystContext, execute_tool
from deskbench.contract.mcp import McpRequest, McpTools
from deskbench.errors import UserError
from deskbench.mcp.code_session import CodeSession
from deskbench.mcp.external import ExternalRunner, Status
from deskbench.mcp.server import McpTool, SessionSource
from deskbench.tracks.analytics.prompts import OUTPUT_NOTE, task_prompt
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask, check_inputs

if TYPE_CHECKING:
    from deskbench.mcp.standalone import TaskServed
    from deskbench.runs.store import RunStore

SERVER_NAME = "deskbench-analytics"
ANSWER_DESCRIPTION = ("Provide the final answer to the task (text; state the value the task asks for). Output "
                      "files are the ones execute_code saved under /mnt/result. Ends the episode.")
EXTERNAL_OUTPUT_NOTE = ("Save any file the task asks for under /mnt/result/ with execute_code (for a chart, save "
                        "the figure as a PNG there). When you are done, call provide_answer with your final answer.")


class AnalyticsSession(CodeSession):
    """One analytics episode: a call past --max-rounds ends it as a round limit, as the paper's
    analyst loop does."""

    def __init__(self, task: AnalyticsTask, ctx: AnalystContext, inputs: list[Path], workdir: Path) -> None:
        super().__init__(ctx, inputs, workdir, ends_at_limit=True)
        self.task = task

    def result(self, status: Status = "ok", error: str | None = None) -> AgentResult:
        status, stop, error = self.ending(status, error)
        sub = AnalyticsSubmission(id=self.task.id, answer=self.answer or "", files=self.files.records(),
                                  files_dir=self.files_dir, rounds=self.rounds, stop=stop,
                                  file_warnings=self.files.warnings)
        return self.rec.result(status, sub, error=error)


def question(task: AnalyticsTask, inputs: list[Path], ctx: AnalystContext) -> str:
    return task_prompt(task, inputs, summary=ctx.settings.summary).replace(OUTPUT_NOTE, EXTERNAL_OUTPUT_NOTE)


def analytics_tools(source: SessionSource[AnalyticsSession], *, cjk_font_hint: bool = False) -> list[McpTool]:
    async def execute_code(code: str) -> str:
        session = source.current()
        try:
            return await session.execute_code(code)
        finally:
            if session.answered.is_set():  # a call past the budget ended the episode: a round limit, stored
                await source.answered(session)

    async def provide_answer(answer: str) -> str:
        session = source.current()
        reply = session.finish(answer)
        await source.answered(session)
        return reply

    return [McpTool(execute_code, execute_tool(cjk_font_hint).description), McpTool(provide_answer, ANSWER_DESCRIPTION)]


def served(tasks: Path, store: RunStore, wanted: str | None, max_rounds: int = 20) -> TaskServed[AnalyticsSession]:
    """`deskbench mcp --tasks FILE [--task ID]`: one analytics task's tools, outside a run."""
    from deskbench.mcp.standalone import TaskServed, pick
    from deskbench.sandbox import Limits, Sandbox
    from deskbench.tracks.analytics.tasks import read_tasks

    items = read_tasks(tasks).items
    task = {t.id: t for t in items}[pick([t.id for t in items], wanted, tasks)]
    from deskbench.agents.code_loop import AnalystSettings

    ctx = AnalystContext(model=None, sandbox=Sandbox(Limits()), tasks_dir=tasks.resolve().parent,
                         run_dir=store.dir, settings=AnalystSettings(max_rounds=max_rounds))
    try:
        inputs = check_inputs(task, ctx.tasks_dir)
    except ValueError as exc:
        raise UserError(f"{tasks}: {exc}; input paths are relative to the tasks file's folder") from None
    store.save_tasks(items)
    store.set_meta("tasks_file", str(tasks.resolve()))
    return TaskServed(store, task.id, SERVER_NAME, question(task, inputs, ctx), analytics_tools,
                      lambda workdir: AnalyticsSession(task, ctx, inputs, workdir))


class AnalyticsMcpTools(McpTools):
    """`deskbench mcp --tasks FILE [--task ID]`: execute_code and provide_answer for one task."""

    serves_tasks: ClassVar[bool] = True

    def tasks(self, request: McpRequest) -> TaskServed[AnalyticsSession]:
        return served(request.source, request.store, request.task, request.max_rounds)


class ExternalAnalyticsAgent(ExternalRunner):
    """`--agent external` on analytics tasks."""

    async def run(self, task: AnalyticsTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        from deskbench.mcp.server import OneEpisode

        try:
            inputs = check_inputs(task, ctx.tasks_dir)
        except ValueError as exc:
            return AgentResult(status="error", error=str(exc))
        session = AnalyticsSession(task, ctx, inputs, workdir)
        tools = analytics_tools(OneEpisode(session), cjk_font_hint=ctx.settings.cjk_font_hint)
        return await self.episode(session, tools, server_name=SERVER_NAME,
                                  question=question(task, inputs, ctx), task_id=task.id)
