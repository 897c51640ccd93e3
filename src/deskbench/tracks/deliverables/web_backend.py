"""What every web backend is (`WebBackend`), what it returns and how it fails, shared by the backends and the tools."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel


class WebError(Exception):
    """A miss the agent reads as the tool's answer (page not found, not text, too slow)."""


class WebUnavailable(Exception):
    """The backend itself failed (key rejected, rate limit that did not clear): the episode ends
    as an error, since a run without the web it was configured with measures something else."""


class SearchHit(BaseModel):
    title: str = ""
    url: str
    snippet: str = ""


class Page(BaseModel):
    url: str  # after redirects
    status: int
    content_type: str
    text: str


class WebBackend(Protocol):
    """What the web tools call; `name` goes into the trajectory."""

    name: str

    async def search(self, query: str, count: int) -> list[SearchHit]: ...

    async def fetch(self, url: str) -> Page: ...

    async def aclose(self) -> None: ...
