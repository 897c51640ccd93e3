"""The deliverables agent (`deliverable-agent`): the analyst agent's execute_code loop with a
deliverable-writing prompt, the package's input files mounted in the sandbox and its required
output files collected from /mnt/result (issue 7 item 7)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from deskbench.agents.analyst import AnalystContext, Deliverables, code_loop
from deskbench.agents.base import AgentResult, Recorder
from deskbench.agents.deliverable_prompts import (
    DELIVERABLE_PROMPT,
    FINAL_NOTE,
    INLINE_HEADER,
    INPUTS_HEADER,
    OUTPUTS_HEADER,
    TRUNCATED,
)
from deskbench.corpus.office import UnreadableFile, normalise
from deskbench.tasks.deliverables import DeliverableSubmission, DeliverableTask


class DeliverablesAgent(Protocol):
    name: str

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult: ...


def inline_inputs(paths: list[Path], budget: int) -> str:
    """The normalised text of the input files, at most `budget` characters shared fairly: each
    file gets an equal share, and what a short file leaves unused goes to the others."""
    if budget <= 0:
        return ""
    texts: list[tuple[str, str]] = []
    for path in paths:
        try:
            parts = normalise(path)
            body = "\n".join(f"# {p.name}\n{p.text}" if p.kind != "document" else p.text for p in parts)
        except UnreadableFile as exc:
            body = f"[could not be read here: {exc}]"
        texts.append((path.name, body))
    shown: dict[int, str] = {}
    remaining = budget
    by_length = sorted(range(len(texts)), key=lambda i: len(texts[i][1]))
    for rank, i in enumerate(by_length):
        share = remaining // (len(texts) - rank)
        body = texts[i][1]
        if len(body) > share:
            body = body[: max(0, share - len(TRUNCATED) - 1)] + "\n" + TRUNCATED
        remaining -= min(len(body), share)
        shown[i] = body
    out = [f"=== {name} ===\n{shown[i]}" for i, (name, _) in enumerate(texts)]
    return "\n\n".join(out)


def deliverable_prompt(task: DeliverableTask, inputs: list[Path], *, max_rounds: int, inline_chars: int) -> str:
    lines = [INPUTS_HEADER, *(f"- /mnt/data/{p.name}" for p in inputs), ""]
    if task.required_outputs:
        lines += [OUTPUTS_HEADER]
        for o in task.required_outputs:
            sections = f" with sections/sheets/slides: {', '.join(o.sections)}" if o.sections else ""
            lines.append(f"- /mnt/result/{o.name} ({o.format}){sections}")
        lines.append("")
    inlined = inline_inputs(inputs, inline_chars)
    if inlined:
        lines += [INLINE_HEADER, inlined, ""]
    return DELIVERABLE_PROMPT.format(task_prompt=task.full_prompt, files_block="\n".join(lines),
                                     max_rounds=max_rounds)


class DeliverableAgent:
    name = "deliverable-agent"

    def __init__(self, inline_chars: int = 24_000) -> None:
        self.inline_chars = inline_chars

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        rec = Recorder(ctx.model)
        inputs = task.input_paths()
        missing = [str(p) for p in inputs if not p.is_file()]
        if missing:
            return rec.result("error", error=f"task {task.id}: input file not found: {missing[0]}")
        files = Deliverables(workdir)
        prompt = deliverable_prompt(task, inputs, max_rounds=ctx.settings.max_rounds,
                                    inline_chars=self.inline_chars)
        end = await code_loop(prompt, inputs, ctx, files, rec,
                              final_note=FINAL_NOTE.format(max_rounds=ctx.settings.max_rounds))
        sub = DeliverableSubmission(
            id=task.id, response=end.answer, files=files.records(),
            files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=end.rounds, stop=end.stop)
        return rec.result(end.status, sub, error=end.error)
