"""`deskbench run --executor ray`: a run's episodes on a Ray cluster, its store on the driver.

The driver prepares the run as the local executor does (the store's meta, the tasks, each
system's identity), then hands episodes to a pool of `EpisodeWorker` actors (runs/ray_worker.py),
one per worker process, each asking for one CPU (the agent loop) and the custom resources its
track says an episode needs (`Track.ray_resources`; by default one `sandbox`, a custom resource
each node declares: how many bubblewrap sandboxes it runs at once). Every episode that ends comes back to the driver, which alone writes the store,
through the local executor's own code (`pending_episodes`, `commit_episode`): a resume skips what
is stored, a kill -9 of the driver loses only the episodes in flight (nothing is stored twice:
each is committed in one transaction when it ends), and a worker process that dies mid-episode
is restarted by Ray, which runs its episodes again (`max_task_retries`); they are stored once,
when they end. An episode whose worker died more often than that is left unstored (the next run
resumes it) and the run ends saying so.

Ray must not reach the network: usage stats are off and no dashboard is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from deskbench.contract.track import Track
from deskbench.errors import UserError
from deskbench.models.types import ProviderRefused
from deskbench.runs.ray_limits import NAMESPACE, limiter_actor, limiter_name
from deskbench.runs.runner import RunCounts, commit_episode, episode_dir, pending_episodes
from deskbench.runs.track import Outcome, PreparedRun, RunRequest

TASK_RETRIES = 3  # an episode whose worker died is run again this many times
RESTARTS = 8  # a worker process that died is restarted this many times
SANDBOX = "sandbox"  # the custom resource of a node's bubblewrap sandboxes (ray start --resources)


def worker_resources(track: Track, request: RunRequest) -> dict[str, float]:
    """The custom Ray resources each worker of this run holds: its track's (`ray_resources`), by
    default one sandbox (a track that says nothing may execute code)."""
    declared = track.ray_resources(request)
    return {SANDBOX: 1.0} if declared is None else {name: float(n) for name, n in declared.items()}


def connect(address: str | None, resources: Mapping[str, float] | None = None) -> Any:
    """Join the cluster at `address` (host:port of its head), or start one on this machine
    (its CPUs, as many sandboxes, and enough of each of `resources`, what a worker holds, for
    one worker per CPU); offline either way."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address and "RAY_AUTH_MODE" not in os.environ and _token_available():
        # `ray start` turns token auth on when a token exists (~/.ray/auth_token); a driver
        # joining by address does not, and is refused: do what ray start did (before ray is imported: it reads this then)
        os.environ["RAY_AUTH_MODE"] = "token"
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'deskbench[ray]'") from None
    if ray.is_initialized():
        return ray
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING, "namespace": NAMESPACE}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            cpus = os.cpu_count() or 1
            local = {SANDBOX: float(cpus), **{name: n * cpus for name, n in (resources or {}).items()}}
            ray.init(num_cpus=cpus, resources=local, include_dashboard=False,
                     _node_ip_address="127.0.0.1", **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"--ray-address {address}: cannot join the Ray cluster ({exc}); give the head's "
                        "host:port as 'ray start --head' printed it") from None
    return ray


def _token_available() -> bool:
    from pathlib import Path

    return bool(os.environ.get("RAY_AUTH_TOKEN")) or Path(
        os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token").is_file()


def pool_size(resources: Mapping[str, float], needs: Mapping[str, float], pending: int) -> int:
    """One worker per CPU of the cluster (and per what it holds of each resource in `needs`, a
    worker's), never more than there are episodes to run."""
    n = int(resources.get("CPU", 0))
    for name, amount in needs.items():
        if amount <= 0:
            continue
        if resources.get(name, 0) < amount:
            why = "executes code" if name == SANDBOX else f"needs {amount:g} {name!r} per worker"
            what = "N sandboxes at once" if name == SANDBOX else f"N {name} on that node"
            raise UserError(f"this run {why} but the Ray cluster has no {name!r} resource; start each node with "
                            f"ray start ... --resources '{{\"{name}\": N}}' ({what})")
        n = min(n, int(resources[name] // amount))
    if n < 1:
        raise UserError("the Ray cluster has no CPU to run episodes on; start its nodes with --num-cpus 1 or more")
    return max(1, min(n, pending))


def shippable(request: RunRequest) -> RunRequest:
    """The request with every path made absolute: a worker does not run in the driver's folder
    (on a cluster of several nodes, the paths must name the same files on every node)."""
    return request.shippable()


def execute_run_ray(prep: PreparedRun, request: RunRequest,
                    on_episode: Callable[[str, RunCounts], None] | None = None) -> list[Outcome]:
    """Every system's missing episodes on the cluster, `prep.concurrency` in flight per system (as
    the local executor runs them, so `--concurrency` means the same on both), spread over the
    workers; each committed by this process as it ends. Each model's limit is the one the track
    opened it with, held cluster-wide."""
    from deskbench.contract.registry import get_track

    needs = worker_resources(get_track(prep.track), request)
    counts = {s.name: RunCounts() for s in prep.systems}
    pending = [(s.name, t, a) for s in prep.systems
               for t, a in pending_episodes(prep.tasks, prep.store, s.name, prep.attempts, prep.replace, counts[s.name],
                                            retry_errors=prep.retry_errors)]
    models = {s.model.id: s.model for s in prep.systems if s.model is not None}
    if not pending:  # a finished run resumed: nothing for a cluster to do, so none is started or joined
        async def close() -> None:
            for model in models.values():
                await model.aclose()

        asyncio.run(close())
        return [Outcome(system=s.name, counts=counts[s.name], ledger=s.model.ledger if s.model else None)
                for s in prep.systems]
    ray = connect(request.ray_address, needs)
    from deskbench.runs.ray_worker import EpisodeWorker

    limiters = {mid: limiter_actor().options(name=limiter_name(mid), get_if_exists=True).remote(m.concurrency)
                for mid, m in models.items()}
    in_flight = max(1, prep.concurrency) * max(1, len({s for s, _, _ in pending}))  # the local executor's bound
    n = pool_size(ray.cluster_resources(), needs, min(len(pending), in_flight)) if pending else 0
    per_worker = -(-in_flight // max(n, 1))  # ceil: the least busy worker takes the next episode
    worker = ray.remote(EpisodeWorker).options(
        num_cpus=1, resources={k: v for k, v in needs.items() if v > 0}, max_restarts=RESTARTS,
        max_task_retries=TASK_RETRIES, max_concurrency=per_worker + 2)
    pool = [worker.remote(shippable(request), list(limiters)) for _ in range(n)]
    load = [0] * n
    ledgers = {s.name: s.model.ledger for s in prep.systems if s.model is not None}
    lost: list[str] = []

    budget = prep.budget  # the run's limit: counted as episodes are stored here (each episode's, on its worker)

    async def one(system: str, task_id: str, attempt: int, slots: asyncio.Semaphore) -> None:
        async with slots:
            if budget is not None and budget.reached():  # no new episode past the run's limit
                budget.not_started += 1
                return
            i = load.index(min(load))  # the least busy worker
            load[i] += 1
            try:
                got = await pool[i].run.remote(system, task_id, attempt)
            except ray.exceptions.RayTaskError as exc:  # the worker could not open the run (e.g. no bubblewrap there)
                cause = exc.cause
                raise cause if isinstance(cause, UserError) else UserError(
                    f"a Ray worker could not run {task_id}: {type(cause).__name__}: {cause}") from None
            except ray.exceptions.RayError as exc:  # its worker died more often than Ray retries
                lost.append(f"{task_id}#{attempt}: {type(exc).__name__}")
                return
            finally:
                load[i] -= 1
            if got.refused is not None:
                raise ProviderRefused(got.refused)
            from deskbench.runs.ray_worker import write_files

            write_files(episode_dir(prep.store.dir, system, task_id, attempt), got.files)
            if budget is not None:
                budget.settle(None, got.ended.result.usage)
            commit_episode(prep.store, system, task_id, attempt, got.ended, counts[system], replace=prep.replace,
                           retry=prep.retry_errors, on_episode=(lambda c: on_episode(system, c)) if on_episode else None)
            if system in ledgers:
                ledgers[system].total = ledgers[system].total + got.ended.result.usage

    async def go() -> None:
        slots = {s.name: asyncio.Semaphore(max(1, prep.concurrency)) for s in prep.systems}
        started = [asyncio.ensure_future(one(s, t.id, a, slots[s])) for s, t, a in pending]
        try:
            await asyncio.gather(*started)
        except BaseException:  # a refusal or a cancel: the episodes in flight stop unrecorded
            for task in started:
                task.cancel()
            await asyncio.gather(*started, return_exceptions=True)
            raise
        finally:
            for model in models.values():
                await model.aclose()

    try:
        asyncio.run(go())
    finally:
        # each worker closes its models and removes its scratch folder, then goes (a dead or
        # stuck one is killed all the same)
        with contextlib.suppress(Exception):
            ray.get([actor.close.remote() for actor in pool], timeout=30)
        for actor in pool:
            ray.kill(actor)
    if lost:
        raise UserError(f"{len(lost)} episode(s) lost their Ray worker more than {TASK_RETRIES} times and were not "
                        f"stored ({', '.join(lost[:3])}); run the same command again to resume them")
    return [Outcome(system=s.name, counts=counts[s.name], ledger=s.model.ledger if s.model else None)
            for s in prep.systems]
