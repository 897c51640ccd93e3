"""What runs on a Ray cluster's workers for `deskbench run --executor ray` (runs/ray_executor.py
is the driver).

An `EpisodeWorker` actor lives in one worker process. It rebuilds the track's prepared run once,
from the picklable `RunRequest`, into a scratch run directory of its own (never the real store:
the driver alone writes that), and keeps it open for every episode it is given: the models'
connections, the sandbox, the corpus (opened read-only from the path the request names, once per
process, never per episode). An episode comes back as what the store keeps (`EndedEpisode`) with
the bytes of its output files; the driver commits it through the same code as the local executor.

A model's concurrency limit holds cluster-wide (runs/ray_limits.py): each worker's
ResilientModel takes its slots from the model's `ModelLimiter` actor; a worker restarted after its
process died gives back what its dead incarnation held (its actor id survives the restart).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import ray

from deskbench.models.types import ProviderRefused
from deskbench.runs.budget import EpisodeMeter
from deskbench.runs.ray_limits import NAMESPACE, RemoteSlots, limiter_name
from deskbench.runs.runner import EndedEpisode, EpisodeFn, HasId, episode_dir, run_one
from deskbench.runs.track import PreparedRun, RunRequest


@dataclass
class WorkerResult:
    """One episode as a worker hands it back: its ending, and its output files (path relative to
    the episode's folder -> bytes); `refused`: a provider refused the call (the run stops)."""

    ended: EndedEpisode | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    refused: str | None = None
    pid: int = 0


SCRATCH = "deskbench-ray-"  # + the worker's pid: a folder whose process is gone is swept


def sweep_scratch(root: Path | None = None) -> int:
    """Remove the scratch folders of workers that died without closing (a killed process, a
    killed driver's job); how many."""
    swept = 0
    for folder in Path(root or tempfile.gettempdir()).glob(f"{SCRATCH}*-*"):
        pid = folder.name[len(SCRATCH):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            swept += 1
    return swept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def read_files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by its path relative to it (as bytes: names need not be UTF-8)."""
    if not folder.is_dir():
        return {}
    return {os.fsdecode(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """The episode's folder as the worker left it: cleared, then every file written."""
    if folder.exists():
        shutil.rmtree(folder)
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


class EpisodeWorker:
    """One worker process's prepared run, opened on its first episode and kept open."""

    def __init__(self, request: RunRequest, models: list[str]) -> None:
        sweep_scratch()
        self._scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH}{os.getpid()}-"))
        self._request = replace(request, out=self._scratch / "run")
        # each model's limiter by name (the driver made them): handles among the arguments would
        # put them in the object store, where a restart could not find them again
        self._limiters = {m: ray.get_actor(limiter_name(m), namespace=NAMESPACE) for m in models}
        self._holder = ray.get_runtime_context().get_actor_id() or str(os.getpid())
        for limiter in self._limiters.values():  # a restarted worker: its dead incarnation's slots come back
            limiter.forget.remote(self._holder)
        self._opening = asyncio.Lock()
        self._prep: PreparedRun | None = None
        self._episodes: dict[str, EpisodeFn] = {}
        self._tasks: dict[str, HasId] = {}
        self._stack = AsyncExitStack()

    async def _open(self) -> PreparedRun:
        async with self._opening:
            if self._prep is None:
                from deskbench.contract.registry import track_for
                from deskbench.models.capabilities import use_capabilities

                if self._request.capabilities is not None:
                    use_capabilities(self._request.capabilities)
                prep = track_for(self._request.tasks, self._request.agents).prepare(self._request)
                for s in prep.systems:
                    if s.model is not None and s.model.id in self._limiters:
                        s.model.limit_with(RemoteSlots(self._limiters[s.model.id], self._holder))
                        self._stack.push_async_callback(s.model.aclose)
                self._episodes = dict(await self._stack.enter_async_context(prep.start()))
                self._tasks = {t.id: t for t in prep.tasks}
                self._prep = prep
            return self._prep

    async def run(self, system: str, task_id: str, attempt: int) -> WorkerResult:
        prep = await self._open()
        try:
            limits = self._request.limits  # each episode's own limits hold here; the run's, on the driver
            meter = EpisodeMeter(limits) if limits.episode_limited else None
            ended = await run_one(self._episodes[system], self._tasks[task_id], attempt, meter)
        except ProviderRefused as exc:
            return WorkerResult(refused=str(exc), pid=os.getpid())
        folder = episode_dir(prep.store.dir, system, task_id, attempt)
        files = read_files(folder)
        shutil.rmtree(folder, ignore_errors=True)  # shipped: the scratch copy is not kept
        return WorkerResult(ended=ended, files=files, pid=os.getpid())

    def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        await self._stack.aclose()
        shutil.rmtree(self._scratch, ignore_errors=True)
