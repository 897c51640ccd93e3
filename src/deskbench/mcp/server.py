"""The MCP server over one track's tools (the official `mcp` package's FastMCP), on stdio or on
streamable HTTP bound to 127.0.0.1. A track brings its tools as `McpTool`s (plain async functions,
their parameters the tool's schema); which session a call goes to is the caller's
(`SessionSource`): `deskbench run --agent external` serves one episode per server,
`deskbench mcp` starts a new episode after each answer.

Over HTTP every server has its own random secret (`SecretGate`): a request reaches the MCP app
only at /<secret>/mcp (the URL handed to the agent: $DESKBENCH_MCP_URL, the `--url` POST's
mcp_url, the line `deskbench mcp --transport http` prints) or at /mcp with `Authorization:
Bearer <secret>`; anything else is answered 401 or 404 by the gate. A local process that finds
the port (/proc/net/tcp) cannot open a session. Within a server, each tool call is attributed to
its MCP session (`caller`): an episode is its session's, never another's."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hmac
import importlib
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from deskbench.errors import UserError
from deskbench.requirements import MCP, mcp_major

_problem = MCP.problem("the MCP server")
if _problem:  # absent, or a release deskbench does not know: one line that says which, not a traceback
    raise UserError(_problem)

S = TypeVar("S")
GRACE_SECONDS = 2  # how long a stopping server waits for its connections, then for its app's shutdown
SECRET_BYTES = 32  # random bytes of a server's secret (secrets.token_urlsafe: 43 URL-safe characters)
MCP_PATH = "/mcp"  # FastMCP's streamable_http_path, behind /<secret>
STDIO_CALLER = "stdio"  # the one client of a stdio server


# ASGI, as Starlette types it (the SDK's app is a Starlette app)
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


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


class Refused(ValueError):
    """A tool call the server will not run (another session's episode, a limit): its message goes
    back to the agent as the tool's error, and nothing is recorded."""


def caller() -> str:
    """The MCP session the running tool call came from: its mcp-session-id over streamable HTTP
    (the session manager has checked it names a live session of this server), STDIO_CALLER on
    stdio (one client), or the server-side session object's id when neither is known."""
    ctx = _REQUEST.get()
    if ctx is None and mcp_major() == 1:  # mcp 1.x keeps the request in its own context variable
        ctx = importlib.import_module("mcp.server.lowlevel.server").request_ctx.get(None)
    if ctx is None:  # not inside an MCP request (a tool function called directly)
        return STDIO_CALLER
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return STDIO_CALLER
    return str(headers.get("mcp-session-id") or f"session-{id(ctx.session)}")


# mcp 2.x has no context variable of the running request: a middleware (`_remember_request`) sets this one
_REQUEST: contextvars.ContextVar[Any] = contextvars.ContextVar("deskbench_mcp_request", default=None)


async def _remember_request(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """mcp 2.x middleware: the request's context (its HTTP request, its session) for `caller`
    while its handler (the tool call) runs."""
    token = _REQUEST.set(ctx)
    try:
        return await call_next(ctx)
    finally:
        _REQUEST.reset(token)


class OneEpisode(Generic[S]):
    """One session for the server's whole life (an episode of `deskbench run`), owned by the first
    MCP session that calls a tool: a call from any other session is refused before it reaches
    the episode, so nothing of it is recorded."""

    def __init__(self, session: S) -> None:
        self.session = session
        self.owner: str | None = None

    def current(self) -> S:
        who = caller()
        if self.owner is None:
            self.owner = who
        elif who != self.owner:
            raise Refused("this episode belongs to another MCP session (the first one that called a tool); "
                          "make every call of the episode in that one session")
        return self.session

    async def answered(self, session: S) -> None:
        return None


class TokenBucket:
    """Calls per second for one server: `rate` tokens a second up to `burst` (default: one
    second's worth, at least 1); a call takes one or is refused at once, never queued. `clock`
    (seconds, monotonic) is injectable so tests drive it without sleeping."""

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.capacity = burst if burst is not None else max(1.0, rate)
        self.clock = clock
        self.tokens = self.capacity
        self.last = clock()

    def take(self) -> bool:
        """One call's token if there is one (the bucket refilled for the time since the last call)."""
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.last) * self.rate)
        self.last = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class McpServer(Protocol):
    """What deskbench uses of the SDK's server (mcp 1.x's FastMCP, 2.x's MCPServer)."""

    async def run_stdio_async(self) -> None: ...


@dataclass(frozen=True)
class BuiltServer:
    """An MCP server of the installed SDK and its streamable HTTP app (at MCP_PATH)."""

    sdk: McpServer
    http_app: Callable[[], ASGIApp]


def build_server(name: str, tools: Sequence[McpTool], instructions: str | None = None) -> BuiltServer:
    """A server offering `tools`; the message of a Refused or a session's ToolError (a
    ValueError) or of a UserError a tool raises is the call's error. `instructions` (the task,
    for `deskbench mcp --tasks`) reach the client at initialize. mcp 1.x: FastMCP; 2.x: MCPServer
    (FastMCP renamed), which keeps an unexpected exception's text on the server, so the agent's
    errors are raised as its ToolError."""
    if mcp_major() == 1:
        fastmcp = importlib.import_module("mcp.server.fastmcp")  # 1.x only: mypy reads the installed 2.x
        V1ToolError = importlib.import_module("mcp.server.fastmcp.exceptions").ToolError

        v1 = fastmcp.FastMCP(name, instructions=instructions, log_level="WARNING", streamable_http_path=MCP_PATH)
        for tool in tools:
            v1.add_tool(_reported(tool.fn, V1ToolError), description=tool.description, structured_output=False)
        return BuiltServer(v1, v1.streamable_http_app)
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    v2: MCPServer[Any] = MCPServer(name, instructions=instructions, log_level="WARNING")
    v2.middleware.append(_remember_request)
    for tool in tools:
        v2.add_tool(_reported(tool.fn, ToolError), description=tool.description, structured_output=False)
    return BuiltServer(v2, lambda: HandshakeOnly(v2.streamable_http_app(streamable_http_path=MCP_PATH)))


def _reported(fn: Callable[..., Awaitable[Any]], tool_error: type[Exception]) -> Callable[..., Awaitable[Any]]:
    """`fn` (its name, signature and annotations kept: they are the tool's schema) raising the
    SDK's ToolError for what the agent must read: the refusals and mistakes deskbench says."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except (ValueError, UserError) as exc:
            raise tool_error(str(exc)) from exc

    return call


class HandshakeOnly:
    """mcp 2.x: an HTTP request of the 2026-07-28 protocol (no initialize, no Mcp-Session-Id) is
    answered 400 before the SDK sees it. Each episode belongs to an MCP session (`caller`) and that
    protocol has none; a 2.x client in its default mode ('auto') then falls back to the initialize
    handshake of 2025-11-25, which has them."""

    def __init__(self, app: ASGIApp) -> None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        self.app = app
        self.versions = {v.encode() for v in HANDSHAKE_PROTOCOL_VERSIONS}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        version = next((bytes(v) for k, v in scope.get("headers", []) if k.lower() == b"mcp-protocol-version"), None)
        if scope["type"] == "http" and version is not None and version not in self.versions:
            body = (b"this MCP server speaks the protocol versions with sessions (initialize, up to 2025-11-25); "
                    b"connect with the initialize handshake (mcp 2.x: Client(mode='legacy' or 'auto'))\n")
            await send({"type": "http.response.start", "status": 400, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


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




class SecretGate:
    """An ASGI app in front of the MCP app: an HTTP request reaches it only at /<secret>/mcp or at
    /mcp with `Authorization: Bearer <secret>` (compared in constant time), its path rewritten to
    /mcp; /mcp without the secret is 401, any other path 404, a websocket closed. The lifespan
    passes through (the MCP session manager starts and stops with the server)."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.secret = secret.encode()
        self.prefixed = f"/{secret}{MCP_PATH}".encode()

    def _allowed(self, scope: Scope) -> bool | None:
        """True: the secret is carried; False: /mcp without it; None: another path."""
        path = str(scope.get("path", "")).encode("utf-8", "surrogateescape")
        if hmac.compare_digest(path, self.prefixed):
            return True
        if path != MCP_PATH.encode():
            return None
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, token = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.secret)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        allowed = self._allowed(scope)
        if allowed:
            await self.app({**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}, receive, send)
            return
        status, body = (401, b"this MCP server needs its secret: use the URL it was started with\n") \
            if allowed is False else (404, b"not found\n")
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        if allowed is False:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def new_secret() -> str:
    """A server's secret: SECRET_BYTES random bytes, URL-safe (it travels in the URL's path)."""
    return secrets.token_urlsafe(SECRET_BYTES)


@asynccontextmanager
async def serve_http(server: BuiltServer, port: int = 0, secret: str | None = None) -> AsyncIterator[str]:
    """Serve streamable HTTP on 127.0.0.1 in this event loop while the block runs, behind a
    SecretGate (`secret`, else a new one); yields the URL, its path carrying the secret."""
    import uvicorn

    _Server = _uvicorn_server()
    secret = secret or new_secret()
    sock = free_socket(port)
    # log_config None: uvicorn leaves logging alone (its loggers are quiet unless --verbose, deskbench/logs.py);
    # no access log: each request's path holds the secret
    config = uvicorn.Config(SecretGate(server.http_app(), secret), log_config=None, log_level=None,
                            lifespan="on", timeout_graceful_shutdown=GRACE_SECONDS, access_log=False)
    http = _Server(config)
    task = asyncio.create_task(http.serve(sockets=[sock]))
    try:
        while not http.started:
            if task.done():
                task.result()  # raises what stopped it
                raise RuntimeError("the MCP server stopped while starting")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/{secret}{MCP_PATH}"
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


async def serve(server: BuiltServer, transport: str, port: int) -> None:
    """`deskbench mcp`: stdio until the client leaves, or HTTP until Ctrl+C."""
    if transport == "stdio":
        await server.sdk.run_stdio_async()
        return
    async with serve_http(server, port) as url:
        # printed once: the URL is the only way in (its path holds the server's secret; keep it to your agent)
        print(f"MCP server (streamable HTTP) at {url}; the URL holds this server's secret, give it only to "
              "your agent; Ctrl+C to stop", flush=True)
        await asyncio.Event().wait()
