"""The MCP server over one track's tools (the official `mcp` package's FastMCP), on stdio or on
streamable HTTP bound to 127.0.0.1. A track brings its tools as `McpTool`s (plain async functions,
their parameters the tool's schema); which session a call goes to is the caller's
(`SessionSource`): `deskbench run --agent external` serves one episode per server,
`deskbench mcp` starts a new episode after each answer."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from deskbench.errors import UserError

try:
    from mcp.server.fastmcp import FastMCP
except ImportError as exc:  # an optional extra: say how to get it, not a traceback
    raise UserError("the MCP server needs the `mcp` package: pip install 'deskbench[mcp]'") from exc

S = TypeVar("S")
GRACE_SECONDS = 2  # how long a stopping server waits for its connections, then for its app's shutdown


@dataclass(frozen=True)
class McpTool:
    """One tool: an async function (its name and typed parameters are the tool's) and what the
    agent is told it does."""

    fn: Callable[..., Awaitable[Any]]
    description: str


class SessionSource(Protocol[S]):
    """Hands each tool call the session it belongs to, and hears of each answer."""

    def current(self) -> S: ...

    async def answered(self, session: S) -> None: ...


class OneEpisode(Generic[S]):
    """One session for the server's whole life (an episode of `deskbench run`)."""

    def __init__(self, session: S) -> None:
        self.session = session

    def current(self) -> S:
        return self.session

    async def answered(self, session: S) -> None:
        return None


def build_server(name: str, tools: Sequence[McpTool], instructions: str | None = None) -> FastMCP:
    """A FastMCP server offering `tools`; an exception a tool raises is the call's error.
    `instructions` (the task, for `deskbench mcp --tasks`) reach the client at initialize."""
    server = FastMCP(name, instructions=instructions, log_level="WARNING")
    for tool in tools:
        server.add_tool(tool.fn, description=tool.description, structured_output=False)
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
    # log_config None: uvicorn leaves logging alone (its loggers are quiet unless --verbose, deskbench/logs.py)
    config = uvicorn.Config(server.streamable_http_app(), log_config=None, log_level=None, lifespan="on",
                            timeout_graceful_shutdown=GRACE_SECONDS)
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
        await _stop(http, task)
        sock.close()


async def _stop(http: Any, task: asyncio.Task[None]) -> None:
    """Stop the server in uvicorn's own order, however the block ended (an answer, an error, a
    Ctrl+C): connections closed (GRACE_SECONDS, then cut), then the app's lifespan told to shut
    down (the MCP session manager ends its sessions) and awaited. Cancelling the server's task
    instead, as this did after 5 s, left its lifespan task waiting; asyncio.run cancelled it at
    exit and uvicorn logged a traceback for each server (seven after one Ctrl+C)."""
    http.should_exit = True
    done, _ = await asyncio.wait({task}, timeout=GRACE_SECONDS + 3)
    if not done:  # a connection that will not close: uvicorn stops waiting for it (and skips the lifespan)
        http.force_exit = True
        done, _ = await asyncio.wait({task}, timeout=GRACE_SECONDS)
    if not done:
        task.cancel()
        await asyncio.wait({task})
    lifespan = getattr(http, "lifespan", None)
    if lifespan is not None and not lifespan.shutdown_event.is_set():
        await asyncio.wait({asyncio.ensure_future(lifespan.shutdown())}, timeout=GRACE_SECONDS)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: a failure while stopping is not worth a traceback at exit


async def serve(server: FastMCP, transport: str, port: int) -> None:
    """`deskbench mcp`: stdio until the client leaves, or HTTP until Ctrl+C."""
    if transport == "stdio":
        await server.run_stdio_async()
        return
    async with serve_http(server, port) as url:
        print(f"MCP server (streamable HTTP) at {url}; Ctrl+C to stop", flush=True)
        await asyncio.Event().wait()
