"""The judge models every track's scorer opens, in the core: a track gets its judge here, never
from another track's scoring (analytics', deliverables' and docqa's --judge flags all open theirs
through `open_judge`, and close them with `close_models`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deskbench.models.resilient import ResilientModel
    from deskbench.models.types import ChatModel


def open_judge(name: str | None, concurrency: int, *, cache: bool | Path = True) -> ResilientModel | None:
    """The model behind a judge flag (None when the flag is not given). Judges use the response
    cache unless told not to (`cache=False`; a path names its file): re-scoring a run must not
    pay twice."""
    if not name:
        return None
    from deskbench.models.registry import open_model

    return open_model(name, role="judge", concurrency=concurrency, cache=cache)


def close_models(*models: ChatModel | None) -> None:
    """Close each distinct judge model once (one model often judges twice: the chart judge is
    the QA judge)."""
    distinct = {id(m): m for m in models if m is not None}.values()
    if distinct:
        async def go() -> None:
            for m in distinct:
                await m.aclose()

        asyncio.run(go())
