"""Run an agent over tasks: episodes in parallel, each committed to the run store when it ends.

Episodes already in the store are skipped, so running the same command again resumes. An
exception inside an episode is recorded as that episode's error; it never stops the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deskbench.agents.base import Agent, AgentContext, AgentResult
from deskbench.runs.store import Episode, RunStore, now
from deskbench.tasks.docqa import DocQASubmission, DocQATask


@dataclass
class RunCounts:
    done: int = 0
    errors: int = 0
    skipped: int = 0
    cost_usd: float = 0.0


def system_name(agent: str, model: str) -> str:
    return f"{agent}:{model}"


async def run_episodes(
    tasks: Sequence[DocQATask],
    agent: Agent,
    ctx: AgentContext,
    store: RunStore,
    system: str,
    *,
    concurrency: int = 16,
    on_episode: Callable[[RunCounts], None] | None = None,
) -> RunCounts:
    counts = RunCounts()
    done = store.done(system)
    pending = [t for t in tasks if (t.id, 0) not in done]
    counts.skipped = len(tasks) - len(pending)
    slots = asyncio.Semaphore(concurrency)

    async def one(task: DocQATask) -> None:
        async with slots:
            started = now()
            try:
                result = await agent.run(task, ctx)
            except Exception as exc:  # an episode's failure is data, not the end of the run
                result = AgentResult(status="error", error=f"{type(exc).__name__}: {exc}")
            store.record(Episode(
                task_id=task.id, system=system, status=result.status, error=result.error,
                submission=result.submission, trajectory=result.trajectory, usage=result.usage,
                started_at=started, finished_at=now(),
            ))
        counts.done += 1
        counts.errors += result.status != "ok"
        counts.cost_usd += result.usage.cost_usd
        if on_episode:
            on_episode(counts)

    await asyncio.gather(*(one(t) for t in pending))
    return counts


def run_submissions(store: RunStore, system: str) -> tuple[list[DocQASubmission], list[str]]:
    """The submissions of a run's successful episodes, and the ids of episodes that failed."""
    subs, failed = [], []
    for ep in store.episodes(system):
        if ep.status == "ok" and ep.submission is not None:
            subs.append(ep.submission)
        else:
            failed.append(ep.task_id)
    return subs, failed
