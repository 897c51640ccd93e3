"""docqa's runners over the one runner (runs/runner.py): a docqa agent's attempts at its tasks,
and the submissions of a run's successful episodes, as MADQA's metrics read them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deskbench.agents.base import AgentContext, AgentResult
from deskbench.runs.runner import HasId, RunCounts, run_attempts
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.agents.protocol import Agent
from deskbench.tracks.docqa.humans import episodes_of
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


async def run_episodes(
    tasks: Sequence[DocQATask],
    agent: Agent,
    ctx: AgentContext,
    store: RunStore,
    system: str,
    *,
    attempts: int = 1,
    concurrency: int = 16,
    on_episode: Callable[[RunCounts], None] | None = None,
) -> RunCounts:
    """docqa: `attempts` attempts of `agent` per task (independent episodes of the same task)."""
    async def episode(task: HasId, attempt: int) -> AgentResult:
        assert isinstance(task, DocQATask)
        return await agent.run(task, ctx)

    return await run_attempts(tasks, episode, store, system, attempts=attempts, concurrency=concurrency,
                              on_episode=on_episode)


def run_submissions(store: RunStore, system: str, attempt: int = 0) -> tuple[list[DocQASubmission], list[str]]:
    """The submissions of a run's successful episodes of one attempt (the first: the one MADQA's
    metrics read), and the ids of that attempt's episodes that failed."""
    subs, failed = [], []
    for ep in episodes_of(store, system):
        if ep.attempt != attempt:
            continue
        if ep.status == "ok" and isinstance(ep.submission, DocQASubmission):
            subs.append(ep.submission)
        else:
            failed.append(ep.task_id)
    return subs, failed
