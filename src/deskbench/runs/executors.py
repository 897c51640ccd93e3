"""Where a prepared run's episodes execute (`deskbench run --executor NAME`), by name.

Every executor takes the same prepared run and commits through the same code
(runs/runner.py `pending_episodes`, `commit_episode`), so a run's store does not depend on it:
`local` runs them in this process (the default), `ray` on a Ray cluster (runs/ray_executor.py,
imported only when asked for, with the optional extra `deskbench[ray]`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from deskbench.errors import UserError
from deskbench.requirements import Extra, Need, check
from deskbench.runs.runner import RunCounts
from deskbench.runs.track import Outcome, PreparedRun, RunRequest, execute_run


class Executor(Protocol):
    def __call__(self, prep: PreparedRun, request: RunRequest | None,
                 on_episode: Callable[[str, RunCounts], None] | None) -> list[Outcome]: ...


def _local(prep: PreparedRun, request: RunRequest | None,
           on_episode: Callable[[str, RunCounts], None] | None) -> list[Outcome]:
    return execute_run(prep, on_episode)


def _ray(prep: PreparedRun, request: RunRequest | None,
         on_episode: Callable[[str, RunCounts], None] | None) -> list[Outcome]:
    from deskbench.runs.ray_executor import execute_run_ray

    if request is None:
        raise UserError("--executor ray runs `deskbench run` only (its workers rebuild the run from its options)")
    return execute_run_ray(prep, request, on_episode)


EXECUTORS: dict[str, Executor] = {"local": _local, "ray": _ray}
NEEDS: dict[str, tuple[Need, ...]] = {"ray": (Extra("ray", "ray", load=False),)}  # checked by get_executor, before the run starts


def get_executor(name: str) -> Executor:
    """The executor called `name`, once what it needs is there (one line with the fix if not)."""
    found = EXECUTORS.get(name)
    if found is None:
        raise UserError(f"--executor {name!r} is not known; use one of: {', '.join(EXECUTORS)}")
    check(f"--executor {name}", NEEDS.get(name, ()))
    return found
