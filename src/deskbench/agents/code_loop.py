"""The execute_code loop every code agent shares (AIDABench §3.2 and Appendix A): the analytics
analyst, the deliverables agent and the File Judge. One tool, `execute_code`, run statelessly in the
sandbox; at most `max_rounds` calls (20 in the paper). A reply without a tool call is the final
answer. A reply that still asks for code once the budget is spent ends it as "limit" (the paper's
round-limit exception) unless the caller asks once more with tools off. A malformed call counts as
a round: the model reads what was wrong and may try again.

Files the code saves to /mnt/result are collected after every call into the episode's work
directory; the deliverables are the union over calls, a later file replacing an earlier one of
the same name (each call starts with an empty /mnt/result, as the paper's sandbox does).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from deskbench.agents.base import Recorder, describe_problem
from deskbench.models.types import ChatModel, ChatRequest, Message, ModelError, ToolCall, ToolSpec
from deskbench.sandbox import ExecResult, Sandbox
from deskbench.tasks.outputs import OutputFileRecord, StopReason
from deskbench.tasks.trajectory import ToolCallStep

# AIDABench's execute_code tool (Appendix A), as the paper describes it.
EXECUTE_CODE_DESCRIPTION = (
    "Execute Python code in a fresh sandbox and return its stdout, stderr and exit status. "
    "Input files are read-only under /mnt/data. Save every output file (spreadsheets, charts) "
    "under /mnt/result: /mnt/result starts empty in each call and what you save there is "
    "collected after the call (a later file with the same name replaces the earlier one). "
    "No network. pandas, numpy, matplotlib, scipy, openpyxl, python-docx and python-pptx are "
    "installed."
)
# deskbench additions, off by default: each changes a failure rate the paper reports (Fig. 4:
# garbled CJK text, round-limit exceedances), so each is a named flag and a protocol note.
# The fonts are installed in the sandbox either way; only telling the model about them differs.
CJK_FONT_HINT = " CJK fonts (Noto Sans CJK) are available to matplotlib."  # --cjk-font-hint

# --last-round-note (and always for loops with a final turn: the deliverables agent, the File Judge)
LAST_ROUND_NOTE = ("[round limit: that was execute_code call {n} of {n}. Your next reply must be the "
                   "final answer, with no tool call.]")

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
    model: ChatModel | None  # None: an external agent's episode (it brings its own model)
    sandbox: Sandbox
    tasks_dir: Path  # task input paths are relative to it
    run_dir: Path  # submissions name their files relative to it
    settings: AnalystSettings = field(default_factory=AnalystSettings)


class LoopTool(Protocol):
    """A tool besides execute_code in a code loop (the deliverables agent's web_search/fetch):
    it records its own step and returns the text the model reads. Each call is a round."""

    spec: ToolSpec

    async def run(self, call: ToolCall, rec: Recorder) -> str: ...


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
                text = await (tool.run(call, rec) if tool else execute_code_call(call, ctx, inputs, files, rec))
                if rounds == settings.max_rounds and warn_last:
                    text += "\n" + LAST_ROUND_NOTE.format(n=settings.max_rounds)
                messages.append(Message(role="tool", tool_call_id=call.id, content=text))
    except ModelError as exc:
        return LoopEnd("error", "error", rounds, error=f"model call failed: {exc}")


async def execute_code_call(call: ToolCall, ctx: AnalystContext, inputs: list[Path], files: Deliverables,
                            rec: Recorder) -> str:
    """Run one execute_code call (the analyst loop's, and an external agent's over MCP); the text the model reads back."""
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
        seconds=round(time.monotonic() - started, 4)), detail={"stdout": res.stdout, "stderr": res.stderr})
    return res.for_model()
