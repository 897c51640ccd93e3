"""docqa's agent protocol: an agent answers one docqa task with the run's context (model, corpus,
settings) and hands back an `AgentResult` whose submission is a `DocQASubmission`
(`submission_of` builds it from the parsed answer). The track's, not the core's: agents/base.py
holds what every track's agents share and names no track."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from deskbench.agents.base import AgentContext, AgentResult, AnswerArgs
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


@runtime_checkable  # a plugin's agent is checked against it (agents/registry.py make_agent)
class Agent(Protocol):
    name: str

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult: ...


def submission_of(task: DocQATask, args: AnswerArgs, **effort: Any) -> DocQASubmission:
    """The submission of an answer to `task` (its effort: steps, llm_calls, search_history)."""
    return DocQASubmission(id=task.id, question=task.question, answer=args.answer,
                           citations=args.citations, **effort)
