"""The AIDABench code agent (`analyst-agent`, paper §3.2 and Appendix A).

Prompt A (Listing 1) with the task, its input files at /mnt/data and, unless switched off, the
auxiliary spreadsheet summary (Appendix F); one tool, `execute_code`, run statelessly in the
sandbox; at most `max_rounds` calls (20 in the paper). A reply without a tool call is the final
answer and ends the episode early. A reply that still asks for code once the budget is spent
ends it as "limit" (the paper's round-limit exception). A malformed call counts as a round: the
model reads what was wrong and may try again.

Files the code saves to /mnt/result are collected after every call into the episode's work
directory; the deliverables are the union over calls, a later file replacing an earlier one of
the same name (each call starts with an empty /mnt/result, as the paper's sandbox does).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from deskbench.agents.analytics_prompts import (
    ANALYST_PROMPT,
    CJK_FONT_HINT,
    EXECUTE_CODE_DESCRIPTION,
    FILES_HEADER,
    LAST_ROUND_NOTE,
    OUTPUT_NOTE,
    SUMMARY_HEADER,
)
from deskbench.agents.base import AgentResult, Recorder, describe_problem
from deskbench.models.types import ChatModel, ChatRequest, Message, ModelError, ToolCall, ToolSpec
from deskbench.sandbox import ExecResult, Sandbox
from deskbench.tasks.analytics import (
    AnalyticsSubmission,
    AnalyticsTask,
    OutputFileRecord,
    StopReason,
)
from deskbench.tasks.trajectory import ToolCallStep

EXECUTE_TOOL = ToolSpec(
    name="execute_code",
    description=EXECUTE_CODE_DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "A complete Python program."}},
        "required": ["code"],
    },
)


def execute_tool(cjk_font_hint: bool) -> ToolSpec:
    """The execute_code tool; with the hint its description names the installed CJK fonts."""
    if not cjk_font_hint:
        return EXECUTE_TOOL
    return EXECUTE_TOOL.model_copy(update={"description": EXECUTE_CODE_DESCRIPTION + CJK_FONT_HINT})

# Lines of sandbox stderr worth keeping with the submission: later checks read them.
ERROR_TAIL_CHARS = 600
_KEEP_STDERR = re.compile(r"missing from (current )?font", re.IGNORECASE)


@dataclass(frozen=True)
class AnalystSettings:
    max_rounds: int = 20
    summary: bool = True  # the paper's full setting; False is its ablation
    # deskbench additions, not the paper's protocol (Fig. 4 counts the failures they prevent)
    last_round_note: bool = False  # the last call's result says "answer now" (--last-round-note)
    cjk_font_hint: bool = False  # the tool description names the CJK fonts (--cjk-font-hint)


@dataclass
class AnalystContext:
    model: ChatModel
    sandbox: Sandbox
    tasks_dir: Path  # task input paths are relative to it
    run_dir: Path  # submissions name their files relative to it
    settings: AnalystSettings = field(default_factory=AnalystSettings)


class LoopTool(Protocol):
    """A tool besides execute_code in a code loop (the deliverables agent's web_search/fetch):
    it records its own step and returns the text the model reads. Each call is a round."""

    spec: ToolSpec

    async def run(self, call: ToolCall, rec: Recorder) -> str: ...


class AnalyticsAgent(Protocol):
    name: str

    async def run(self, task: AnalyticsTask, ctx: AnalystContext, workdir: Path) -> AgentResult: ...


def task_prompt(task: AnalyticsTask, inputs: list[Path], *, summary: bool) -> str:
    """The instruction, where its files are, and the auxiliary summary (unless ablated)."""
    lines = [task.instruction, "", FILES_HEADER]
    lines += [f"- /mnt/data/{p.name}" for p in inputs]
    lines += ["", OUTPUT_NOTE]
    if summary:
        from deskbench.corpus.sheet_summary import summarise

        text = summarise(inputs)
        if text:
            lines += ["", SUMMARY_HEADER, text]
    return "\n".join(lines)


def check_inputs(task: AnalyticsTask, tasks_dir: Path) -> list[Path]:
    """The task's input files; two with the same name would collide under /mnt/data."""
    paths = task.input_paths(tasks_dir)
    names = [p.name for p in paths]
    if len(set(names)) != len(names):
        raise ValueError(f"task {task.id}: two input files share a name ({', '.join(names)})")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"task {task.id}: input file not found: {missing[0]}")
    return paths


class Deliverables:
    """The episode's output files: each call's /mnt/result is collected into calls/<n>/ and the
    latest version of every name is kept in result/."""

    def __init__(self, workdir: Path) -> None:
        if workdir.exists():  # a resumed episode that was cut short starts clean
            shutil.rmtree(workdir)
        self.calls = workdir / "calls"
        self.result = workdir / "result"
        self.result.mkdir(parents=True)
        self.n = 0
        self.warnings: dict[str, list[str]] = {}  # output file -> kept stderr lines of its call

    def next_call_dir(self) -> Path:
        self.n += 1
        return self.calls / str(self.n)

    def merge(self, res: ExecResult) -> None:
        kept = [line for line in res.stderr.splitlines() if _KEEP_STDERR.search(line)]
        for f in res.files:
            self.warnings[f.name] = kept
            dest = self.result / f.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f.path, dest)

    def records(self) -> list[OutputFileRecord]:
        out = []
        for path in sorted(p for p in self.result.rglob("*") if p.is_file()):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out.append(OutputFileRecord(name=path.relative_to(self.result).as_posix(),
                                        size=path.stat().st_size, sha256=digest))
        return out


@dataclass
class LoopEnd:
    """How a code loop ended: ok with the final reply, limit (round budget spent), or error."""

    status: Literal["ok", "error", "limit"]
    stop: StopReason
    rounds: int
    answer: str = ""
    error: str | None = None
    # the conversation the final reply answered (without that reply): a caller that cannot read
    # the answer (the File Judge's verdict) asks again in the same conversation
    messages: list[Message] = field(default_factory=list)


async def code_loop(prompt: str, inputs: list[Path], ctx: AnalystContext, files: Deliverables,
                    rec: Recorder, *, final_note: str | None = None, system: str | None = None,
                    tools: Sequence[LoopTool] = ()) -> LoopEnd:
    """The execute_code loop the code agents and the File Judge share: the model calls the tool
    until it replies without one, or the round budget is spent. With `final_note`, a model
    still calling tools once the budget is spent is told so and asked once more with tools off
    (the deliverables agent: a deliverable in hand beats none; the File Judge: a verdict);
    without it the episode ends at the round limit (AIDABench's exception). `system`, if given,
    is a system turn before the prompt. `tools` are offered beside execute_code; their calls count
    against the same budget. The last call's result carries LAST_ROUND_NOTE with `final_note` or
    with settings.last_round_note (off for the paper's analyst: its model is not warned)."""
    settings = ctx.settings
    extra = {t.spec.name: t for t in tools}
    specs = [execute_tool(settings.cjk_font_hint), *(t.spec for t in tools)]
    warn_last = settings.last_round_note or final_note is not None
    messages = [Message(role="system", content=system)] if system else []
    messages.append(Message(role="user", content=prompt))
    rounds = 0
    try:
        while True:
            response = await rec.complete(ChatRequest(
                messages=messages, tools=specs, tool_choice="auto"))
            messages.append(response.message)
            calls = response.message.tool_calls
            if not calls:
                return LoopEnd("ok", "answer", rounds, response.message.text().strip(), messages=messages[:-1])
            if rounds >= settings.max_rounds:
                if final_note is None:
                    return LoopEnd("limit", "round_limit", rounds,
                                   error=f"round limit: still calling execute_code after {rounds} calls")
                messages += [Message(role="tool", tool_call_id=c.id, content="not run: the execute_code budget is spent")
                             for c in calls]
                messages.append(Message(role="user", content=final_note))
                final = await rec.complete(ChatRequest(messages=messages, tools=specs, tool_choice="none"))
                return LoopEnd("ok", "round_limit", rounds, final.message.text().strip(), messages=messages)
            for call in calls:
                if rounds >= settings.max_rounds:  # calls beyond the budget in one reply
                    messages.append(Message(role="tool", tool_call_id=call.id,
                                            content="not run: the execute_code budget is spent"))
                    continue
                rounds += 1
                tool = extra.get(call.name)
                text = await (tool.run(call, rec) if tool else _execute(call, ctx, inputs, files, rec))
                if rounds == settings.max_rounds and warn_last:
                    text += "\n" + LAST_ROUND_NOTE.format(n=settings.max_rounds)
                messages.append(Message(role="tool", tool_call_id=call.id, content=text))
    except ModelError as exc:
        return LoopEnd("error", "error", rounds, error=f"model call failed: {exc}")


async def _execute(call: ToolCall, ctx: AnalystContext, inputs: list[Path], files: Deliverables,
                   rec: Recorder) -> str:
    """Run one execute_code call; the text the model reads back."""
    started = time.monotonic()
    try:
        if call.name != EXECUTE_TOOL.name:
            raise ValueError(f"unknown tool {call.name!r}; the only tool is execute_code")
        code = call.parsed().get("code")
        if not isinstance(code, str) or not code.strip():
            raise ValueError("execute_code needs a non-empty 'code' string")
    except ValueError as exc:
        problem = describe_problem(exc)
        rec.add(ToolCallStep(name=call.name, arguments={"raw": call.arguments[:2000]},
                             result={"error": problem}))
        return f"error: {problem}"
    res = await ctx.sandbox.arun(code, inputs=inputs, collect_to=files.next_call_dir())
    files.merge(res)
    rec.add(ToolCallStep(
        name=EXECUTE_TOOL.name, arguments={"code": code},
        result={"exit_code": res.exit_code, "signal": res.signal, "limit_hits": res.limit_hits,
                "files": [[f.name, f.size] for f in res.files], "stdout_chars": len(res.stdout),
                "stderr_chars": len(res.stderr),
                # the end of a failed call's traceback: what `deskbench diagnose` classifies
                **({"error_tail": res.stderr[-ERROR_TAIL_CHARS:]} if res.exit_code or res.signal else {})},
        seconds=round(time.monotonic() - started, 4)))
    return res.for_model()


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
