"""The MCP server over a DocqaSession's tools (the official `mcp` package's FastMCP), on stdio or
on streamable HTTP bound to 127.0.0.1. Which session a call goes to is the caller's
(`SessionSource`): `deskbench run --agent external` serves one episode per server,
`deskbench mcp` starts a new episode after each answer."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from deskbench.errors import UserError
from deskbench.mcp.session import (
    ANSWER_DESCRIPTION,
    GET_PAGE_DESCRIPTION,
    SEARCH_DESCRIPTION,
    DocqaSession,
)
from deskbench.models.types import ImagePart, TextPart

try:
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ContentBlock, ImageContent, TextContent
except ImportError as exc:  # an optional extra: say how to get it, not a traceback
    raise UserError("the MCP server needs the `mcp` package: pip install 'deskbench[mcp]'") from exc

ENV_URL = "DESKBENCH_MCP_URL"  # where an external agent finds the server
ENV_QUESTION = "DESKBENCH_QUESTION"


class CitationArg(BaseModel):
    """A cited page, as provide_answer takes it."""

    file: str = Field(description="the document's id, as search_documents returns it")
    page: int = Field(description="the page number, from 1")


class SessionSource(Protocol):
    """Hands each tool call the session it belongs to, and hears of each answer."""

    def current(self) -> DocqaSession: ...

    async def answered(self, session: DocqaSession) -> None: ...


class OneEpisode:
    """One session for the server's whole life (an episode of `deskbench run`)."""

    def __init__(self, session: DocqaSession) -> None:
        self.session = session

    def current(self) -> DocqaSession:
        return self.session

    async def answered(self, session: DocqaSession) -> None:
        return None


def build_server(source: SessionSource) -> FastMCP:
    """The FastMCP server with docqa's three tools, each going to `source.current()`."""
    server = FastMCP("deskbench-docqa", log_level="WARNING")

    async def search_documents(query: str) -> str:
        return await source.current().search_documents(query)

    async def get_page(file: str, page: int, view: Literal["image", "text"] = "image") -> list[ContentBlock]:
        parts = await source.current().get_page(file, page, view)
        blocks: list[ContentBlock] = []
        for part in parts:
            if isinstance(part, TextPart):
                blocks.append(TextContent(type="text", text=part.text))
            elif isinstance(part, ImagePart):
                blocks.append(ImageContent(type="image", data=part.data_b64, mimeType=part.mime))
        return blocks

    async def provide_answer(answer: list[str], citations: list[CitationArg]) -> str:
        session = source.current()
        reply = await session.provide_answer(answer, [c.model_dump() for c in citations])
        await source.answered(session)
        return reply

    server.add_tool(search_documents, description=SEARCH_DESCRIPTION, structured_output=False)
    server.add_tool(get_page, description=GET_PAGE_DESCRIPTION, structured_output=False)
    server.add_tool(provide_answer, description=ANSWER_DESCRIPTION, structured_output=False)
    return server


def free_socket(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (port 0: one the system picks), never another interface."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise UserError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror}); choose another port") from exc
    sock.listen(64)
    return sock


def _uvicorn_server() -> type:
    import uvicorn

    class QuietServer(uvicorn.Server):
        """A uvicorn server that leaves the signals alone: the command's loop owns Ctrl+C, and
        servers of concurrent episodes would each restore another's handlers."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer


@asynccontextmanager
async def serve_http(server: FastMCP, port: int = 0) -> AsyncIterator[str]:
    """Serve streamable HTTP on 127.0.0.1 in this event loop while the block runs; yields the URL."""
    import uvicorn

    _Server = _uvicorn_server()
    sock = free_socket(port)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=2)
    http = _Server(config)
    task = asyncio.create_task(http.serve(sockets=[sock]))
    try:
        while not http.started:
            if task.done():
                task.result()  # raises what stopped it
                raise RuntimeError("the MCP server stopped while starting")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}{server.settings.streamable_http_path}"
    finally:
        http.should_exit = True
        try:
            await asyncio.wait_for(task, timeout=5)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
        sock.close()
