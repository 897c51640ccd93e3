"""docqa plugin agents for tests/test_first_hour_runs.py, addressed by module path
(`--agent first_hour_agents:FlakyLexical` with tests/ on PYTHONPATH), as a user's agent would be.

Both answer as the built-in `lexical` agent does (no model call); what makes them fail or wait
is a file the test controls, named by an environment variable, so the test decides what happens
without relying on timing:
- FlakyLexical: a task whose id is a line of $FIRST_HOUR_BROKEN fails as an agent with a missing
  extra fails (ModuleNotFoundError); one listed in $FIRST_HOUR_LIMIT reaches its step limit.
- WaitingLexical: a task whose id is not a line of $FIRST_HOUR_QUICK waits until the run is
  interrupted (it never ends on its own).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from deskbench.agents.base import AgentContext, AgentResult
from deskbench.tracks.docqa.agents.lexical import LexicalAgent
from deskbench.tracks.docqa.tasks import DocQATask


def _listed(variable: str, task_id: str) -> bool:
    path = os.environ.get(variable)
    return bool(path) and Path(path).is_file() and task_id in Path(path).read_text().split()  # type: ignore[arg-type]


class FlakyLexical:
    name = "flaky-lexical"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        if _listed("FIRST_HOUR_BROKEN", task.id):
            import importlib

            importlib.import_module("mcp_not_installed_here")  # ModuleNotFoundError, as a missing extra
        if _listed("FIRST_HOUR_LIMIT", task.id):
            return AgentResult(status="limit", error="step limit reached (1 steps)")
        return await LexicalAgent().run(task, ctx)


class WaitingLexical:
    name = "waiting-lexical"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        if not _listed("FIRST_HOUR_QUICK", task.id):
            await asyncio.Event().wait()  # until cancelled: the run is interrupted while this waits
        return await LexicalAgent().run(task, ctx)
