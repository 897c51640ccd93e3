"""How people appear among systems: `human:NAME` (search, MADQA's human baseline) and
`human-oracle:NAME` (the gold evidence pages shown instead of search). One home for the naming,
shared by the web app that records them and the analyses that pool them into one Human row."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from deskbench.runs.store import Episode, RunStore

KINDS = ("human", "human-oracle")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)
_POOLED = re.compile(r"^(?P<prefix>(?:[^/]+/)?)(?P<kind>human|human-oracle):[^/]+$")
_POOLED_ROW = re.compile(r"^(?:[^/]+/)?(?:human|human-oracle)$")  # a run-dir prefix has no "/"


def human_system(user: str, oracle: bool) -> str:
    return f"{KINDS[1] if oracle else KINDS[0]}:{user}"


def pooled_name(system: str) -> str | None:
    """`human:alice` -> `human` (a run-dir prefix such as `run1/` is kept); None for agents."""
    m = _POOLED.match(system)
    return m["prefix"] + m["kind"] if m else None


def is_human(system: str) -> bool:
    """A person's row: `human:NAME`, `human-oracle:NAME`, or their pooled `human` / `human-oracle`."""
    return pooled_name(system) is not None or _POOLED_ROW.match(system) is not None


def pooled_systems(systems: list[str]) -> list[str]:
    """The systems with every `human:NAME` replaced by one `human` row (and likewise for
    `human-oracle`), in first-seen order: MADQA's single Human row over 20 annotators' batches."""
    return list(dict.fromkeys(pooled_name(s) or s for s in systems))


def episodes_of(store: RunStore, system: str) -> list[Episode]:
    """A system's episodes; for a pooled `human` / `human-oracle`, every annotator's attempt-0
    episodes with, per task, the earliest finished one (a later annotator of the same question is
    there for agreement, not counted twice)."""
    if system not in KINDS:
        return store.episodes(system)
    first: dict[str, Episode] = {}
    for name in store.systems():
        if pooled_name(name) != system:
            continue
        for ep in store.episodes(name):
            if ep.attempt == 0 and (ep.task_id not in first or ep.finished_at < first[ep.task_id].finished_at):
                first[ep.task_id] = ep
    return list(first.values())


def tasks_scored(system: str, tasks: list[T], answered: set[str]) -> list[T]:
    """People answer the questions of their batches, not the whole task file: a person (or the
    pool) is scored on the questions they submitted; a question still pending is not done rather
    than wrong (`deskbench serve batches` shows progress). Agents are scored on every task."""
    return [t for t in tasks if t.id in answered] if is_human(system) else tasks
