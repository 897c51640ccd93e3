"""A long-running provider request that outlives its process (a background response, a deep
research interaction): its id is written beside the episode's folder before the first poll, so
a run killed while it waits resumes by polling the same request, never by submitting (and
paying for) a second one. The record is removed once the episode's outcome is saved.

The record sits beside the folder, not in it: an episode's folder is cleared when it restarts
(agents/code_loop.py Deliverables)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class PendingRequest(BaseModel):
    """What is needed to find a submitted request again."""

    provider: str  # "anthropic", "openai", "gemini"
    api: str  # the provider's API the id belongs to, e.g. "responses", "interactions"
    id: str
    model: str
    submitted_at: float = Field(default_factory=time.time)
    data: dict[str, Any] = Field(default_factory=dict)  # uploaded file ids, container id, ...


def pending_path(workdir: Path) -> Path:
    """`outputs/<system>/<task>/<attempt>.pending.json`."""
    return workdir.with_name(workdir.name + ".pending.json")


def load_pending(workdir: Path) -> PendingRequest | None:
    path = pending_path(workdir)
    if not path.is_file():
        return None
    return PendingRequest.model_validate_json(path.read_text(encoding="utf-8"))


def save_pending(workdir: Path, request: PendingRequest) -> None:
    """Written whole or not at all (a kill during the write leaves the previous record)."""
    path = pending_path(workdir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(request.model_dump_json(indent=1), encoding="utf-8")
    os.replace(tmp, path)


def clear_pending(workdir: Path) -> None:
    pending_path(workdir).unlink(missing_ok=True)


class PollTimeout(Exception):
    """The request was still running after the wait allowed; its record is kept for a resume."""


async def poll_until(fetch: Callable[[], Awaitable[T]], done: Callable[[T], bool], *,
                     interval: float, max_interval: float, max_wait: float) -> T:
    """Fetch until `done`, the wait between fetches growing by half each time up to
    `max_interval` (deep research takes minutes; tests pass intervals of milliseconds)."""
    start = time.monotonic()
    wait = interval
    while True:
        value = await fetch()
        if done(value):
            return value
        if time.monotonic() - start > max_wait:
            raise PollTimeout(f"still running after {max_wait:.0f} s")
        await asyncio.sleep(wait)
        wait = min(max_interval, wait * 1.5)
