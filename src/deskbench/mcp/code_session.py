"""The tools the code agents share, for one episode served over MCP: execute_code run exactly as
the built-in agents run it (agents/code_loop.py: the same sandbox and limits, the task's inputs at
/mnt/data, each call's /mnt/result collected into the episode's outputs folder, the same
ToolCallStep and transcript event), the extra loop tools (the deliverables web tools) and the
episode's end. Every call counts against the run's --max-rounds budget, as in the code loop;
what a call past it does is the track's (`ends_at_limit`): the analyst's episode ends as a round
limit (AIDABench's exception), the deliverables agent is told to submit what it has."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from deskbench.agents.base import Recorder
from deskbench.agents.code_loop import (
    EXECUTE_TOOL,
    AnalystContext,
    Deliverables,
    LoopTool,
    execute_code_call,
)
from deskbench.mcp.external import Status
from deskbench.models.types import ChatModel, ToolCall
from deskbench.tasks.outputs import StopReason
from deskbench.tasks.trajectory import ToolCallStep


class ToolError(ValueError):
    """A call the agent got wrong or made too late: the message goes back to it as the tool's error."""


class CodeSession:
    """One code episode's tools and what they recorded. The episode is over (`answered` set) at
    the answer tool or, with `ends_at_limit`, at a call past the budget."""

    answer_tool = "provide_answer"

    def __init__(self, ctx: AnalystContext, inputs: list[Path], workdir: Path, *,
                 tools: Sequence[LoopTool] = (), ends_at_limit: bool = False) -> None:
        self.ctx, self.inputs, self.ends_at_limit = ctx, inputs, ends_at_limit
        self.tools = {t.spec.name: t for t in tools}
        # No model is called here (the agent's own is out of sight): the Recorder keeps the
        # trajectory and the transcript and never reaches complete().
        self.rec = Recorder(cast(ChatModel, None))
        self.files = Deliverables(workdir)
        self.rounds = 0
        self.budget_hit = False
        self.limit_error: str | None = None
        self.answer: str | None = None
        self.answered = asyncio.Event()

    @property
    def files_dir(self) -> str:
        return os.path.relpath(self.files.result, self.ctx.run_dir)

    def _open(self) -> None:
        if self.answered.is_set():
            raise ToolError("this episode is over: the answer was given or the budget spent")

    def _round(self, name: str) -> ToolCall:
        """The next round's call, refused past the budget."""
        self._open()
        budget = self.ctx.settings.max_rounds
        if self.rounds >= budget:
            self.budget_hit = True
            if self.ends_at_limit:
                self.limit_error = f"round limit: still calling {name} after {self.rounds} calls"
                self.answered.set()
                raise ToolError(f"not run: the budget of {budget} calls is spent; the episode ended at the round limit")
            raise ToolError(f"not run: the budget of {budget} calls is spent; call {self.answer_tool} now")
        self.rounds += 1
        return ToolCall(id=f"call-{self.rounds}", name=name, arguments="")

    async def execute_code(self, code: str) -> str:
        call = self._round(EXECUTE_TOOL.name).model_copy(update={"arguments": json.dumps({"code": code})})
        return await execute_code_call(call, self.ctx, self.inputs, self.files, self.rec)

    async def loop_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """A tool besides execute_code, run (and recorded) as the code loop runs it."""
        call = self._round(name).model_copy(update={"arguments": json.dumps(arguments)})
        return await self.tools[name].run(call, self.rec)

    def finish(self, answer: str, **arguments: Any) -> str:
        """The answer tool: recorded, and the episode is over."""
        self._open()
        self.rec.add(ToolCallStep(name=self.answer_tool, arguments=arguments or {"answer": answer},
                                  result={"ok": True}))
        self.answer = answer
        self.answered.set()
        return "answer recorded"

    def ending(self, status: Status, error: str | None) -> tuple[Status, StopReason, str | None]:
        """How the episode ended: (status, the submission's stop reason, error)."""
        if self.limit_error is not None:
            return "limit", "round_limit", self.limit_error
        if self.answer is None:
            return ("error" if status == "ok" else status), "error", error or f"the agent gave no {self.answer_tool}"
        return "ok", "round_limit" if self.budget_hit else "answer", None
