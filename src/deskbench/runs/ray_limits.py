"""A model's concurrency limit held cluster-wide for `deskbench run --executor ray`.

One `ModelLimiter` actor per model endpoint holds the slots, and each worker's ResilientModel
takes its slots there (`RemoteSlots`) instead of its own semaphore. Slots are leased per worker
actor: a worker restarted after its process died gives back what its dead incarnation held.

Its own module, importing nothing of deskbench (nor Ray until an actor is made: the driver reads
NAMESPACE before it knows Ray is installed): Ray starts a process for each actor, and the
limiter's process imports only this file (the episode workers' module, runs/ray_worker.py,
brings the runner, the tracks' code and the model SDKs).
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from types import TracebackType
from typing import Any

NAMESPACE = "deskbench"  # the limiters are found by name in it (runs/ray_executor.py joins it)


class ModelLimiter:
    """The per-model concurrency limit of the whole cluster (an async actor: a waiting acquire
    does not block the others)."""

    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._held: Counter[str] = Counter()

    async def acquire(self, holder: str) -> None:
        await self._slots.acquire()
        self._held[holder] += 1

    async def release(self, holder: str) -> None:
        if self._held[holder] > 0:
            self._held[holder] -= 1
            self._slots.release()

    async def forget(self, holder: str) -> int:
        """Give back every slot `holder` holds (its process died mid-call); how many."""
        n = self._held.pop(holder, 0)
        for _ in range(n):
            self._slots.release()
        return n


@functools.cache
def limiter_actor() -> Any:
    """ModelLimiter as a Ray actor class (untyped): `.options(...).remote(limit)` starts one.
    Made by calling ray.remote rather than decorating, so ModelLimiter stays the plain class."""
    import ray

    return ray.remote(num_cpus=0)(ModelLimiter)


def limiter_name(model_id: str) -> str:
    return f"deskbench-model-limit:{model_id}"


class RemoteSlots:
    """`async with` a slot of a ModelLimiter: what ResilientModel.limit_with takes."""

    def __init__(self, limiter: Any, holder: str) -> None:
        self._limiter = limiter
        self._holder = holder

    async def __aenter__(self) -> None:
        await self._limiter.acquire.remote(self._holder)

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._limiter.release.remote(self._holder)
