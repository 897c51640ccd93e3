"""Plugin agents for the analytics and deliverables tracks, addressed by module path
(`--agent tests.plugin_agents:SandboxSumAgent`), as a user's agent would be: no install, the
track's context objects used as the built-in agents use them (the sandbox through
`ctx.sandbox.arun`, the output folders through `Deliverables`, the trajectory through a Recorder).
Each checks it got the same context a built-in gets, so a wrong one is a failed episode."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

from deskbench.agents.base import AgentResult, Recorder
from deskbench.agents.code_loop import AnalystContext, Deliverables
from deskbench.models.types import ChatModel
from deskbench.sandbox import Sandbox
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask

SUM_CODE = ("import csv, glob\n"
            "rows = [r for p in sorted(glob.glob('/mnt/data/*.csv')) for r in csv.DictReader(open(p))]\n"
            "print(sum(float(r['amount']) for r in rows))\n"
            "open('/mnt/result/total.txt', 'w').write('done')\n")
LIST_CODE = "import os\nprint(', '.join(sorted(os.listdir('/mnt/data'))))\nopen('/mnt/result/notes.md', 'w').write('# Notes')\n"


def _check_context(ctx: object, workdir: Path) -> AnalystContext:
    if not isinstance(ctx, AnalystContext) or not isinstance(ctx.sandbox, Sandbox):
        raise TypeError(f"a plugin agent got {type(ctx).__name__}, not the AnalystContext with a Sandbox")
    if ctx.run_dir not in workdir.parents:
        raise ValueError(f"work directory {workdir} is not inside the run {ctx.run_dir}")
    return ctx


async def _execute(code: str, ctx: AnalystContext, inputs: list[Path], files: Deliverables, rec: Recorder) -> str:
    res = await ctx.sandbox.arun(code, inputs=inputs, collect_to=files.next_call_dir())
    files.merge(res)
    rec.add(ToolCallStep(name="execute_code", arguments={"code": code},
                         result={"exit_code": res.exit_code, "files": [[f.name, f.size] for f in res.files]}),
            detail={"stdout": res.stdout, "stderr": res.stderr})
    if res.exit_code:
        raise RuntimeError(f"the sandbox call failed: {res.stderr[-500:]}")
    return res.stdout.strip()


class SandboxSumAgent:
    """analytics: sums the `amount` column of the task's CSV inputs in the sandbox."""

    track = "analytics"
    name = "sandbox-sum"
    needs_model = False

    async def run(self, task: AnalyticsTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        ctx = _check_context(ctx, workdir)
        rec = Recorder(cast(ChatModel, ctx.model))
        files = Deliverables(workdir)
        total = await _execute(SUM_CODE, ctx, task.input_paths(ctx.tasks_dir), files, rec)
        sub = AnalyticsSubmission(id=task.id, answer=f"The total amount is {total}.", files=files.records(),
                                  files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=1, stop="answer")
        return rec.result("ok", sub)


class SandboxSumDeliverable:
    """deliverables: lists its input files in the sandbox and writes a note; given the run's
    options through configure, as `deliverables/agent.py make_agent` does for plugins."""

    track = "deliverables"
    name = "sandbox-sum-deliverable"

    def __init__(self) -> None:
        self.options: dict[str, object] = {}

    def configure(self, options: dict[str, object]) -> None:
        self.options = dict(options)

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        ctx = _check_context(ctx, workdir)
        rec = Recorder(ctx.model)
        files = Deliverables(workdir)
        listed = await _execute(LIST_CODE, ctx, task.input_paths(), files, rec)
        response = f"Inputs read: {listed}. Options seen: {', '.join(sorted(self.options))}."
        sub = DeliverableSubmission(id=task.id, response=response, files=files.records(),
                                    files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=1, stop="answer")
        return rec.result("ok", sub)
