"""An agent running as a service (`--agent external --url URL`): deskbench POSTs one JSON request
per episode (`ServiceRequest`) and the service answers through the episode's MCP tools; the
HTTP response only acknowledges. Track-neutral: whatever serves the tools hands in its URL and
the event its answer tool sets.

The service may call provide_answer before or after it acknowledges; either way the episode
ends at the answer (a late acknowledgment gets a few seconds, then is dropped), at a refused or
failed POST (its status and the start of the body are the episode's error) or at the time limit."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

from pydantic import BaseModel, Field

from deskbench.errors import UserError

BODY_CHARS = 300  # characters of a refusing service's body kept in the episode's error
ACK_GRACE_SECONDS = 5.0  # after the answer, how long the acknowledgment may take

Status = Literal["ok", "error", "limit"]


class ServiceRequest(BaseModel):
    """The JSON body POSTed to the service once per episode (docs/formats.md)."""

    task_id: str = Field(description="the task's id, as in the tasks file")
    question: str = Field(description="the task's question")
    mcp_url: str = Field(description="the episode's MCP server (streamable HTTP on 127.0.0.1), its path "
                         "holding the server's secret; answer by calling its provide_answer tool")


def check_url(url: str) -> str:
    """A service URL the run can POST to: http(s) with a host. Returned as given (its
    credentials, if any, are sent); stored and shown only through deskbench.redact."""
    from urllib.parse import urlsplit

    from deskbench.redact import redact_url

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--url {redact_url(url)!r} is not an http(s) URL with a host; give e.g. http://127.0.0.1:8080/episode")
    return url.strip()


async def _post(url: str, request: ServiceRequest) -> str | None:
    """POST the request; None when the service acknowledged (2xx), else why not, in one line."""
    import aiohttp

    try:
        async with aiohttp.ClientSession() as http, http.post(url, json=request.model_dump()) as resp:
            if 200 <= resp.status < 300:
                return None
            body = (await resp.text(errors="replace")).strip()
            return f"POST {url} answered {resp.status} {resp.reason or ''}".rstrip() + f": {body[:BODY_CHARS]}"
    except (aiohttp.ClientError, OSError) as exc:
        return f"POST {url} failed: {type(exc).__name__}: {exc}"


async def call_service(url: str, request: ServiceRequest, answered: asyncio.Event,
                       timeout: float) -> tuple[Status, str | None]:
    """Until the answer, a failed POST or the time limit: (status, error)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    post = asyncio.ensure_future(_post(url, request))
    answer = asyncio.ensure_future(answered.wait())
    try:
        done, _ = await asyncio.wait({post, answer}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if answered.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(post), ACK_GRACE_SECONDS)
            return "ok", None
        if post in done:
            error = post.result()
            if error is not None:
                return "error", error
            with contextlib.suppress(TimeoutError):  # acknowledged: the answer may follow
                await asyncio.wait_for(asyncio.shield(answer), max(0.0, deadline - loop.time()))
            if answered.is_set():
                return "ok", None
        return "limit", f"no provide_answer within {timeout:g} s of the POST to {url}"
    finally:
        post.cancel()
        answer.cancel()
