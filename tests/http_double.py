"""The local HTTP server under the test doubles (FakeOpenAI, SimOpenAI, SimAnthropic).

Each double decides what to answer; this module only carries bytes. LocalJsonServer listens on
127.0.0.1, on a port the system picks, hands each POST's path, headers (names lower-cased) and raw
body to a callback, and writes back the (status, headers, body) the callback returns, with a
Content-Length. If the callback raises, nothing is answered: http.server prints the traceback and
drops the connection, as it would for any handler that crashes.

    with LocalJsonServer(on_post) as server:
        url = f"{server.url}/v1"

ServedDouble is the doubles' base class: `with double:` serves double._handle for the block.

MethodServer and MethodDouble do the same for the REST simulators (tests/sim_openai_file_search.py,
sim_openai_deep_research.py, sim_gemini_file_search.py, sim_gemini_interactions.py,
sim_anthropic_research.py), whose callback also takes the method (GET, POST, DELETE, PATCH); a
JsonMethodDouble's _route answers each request, and it turns the answer into JSON (or bytes),
counting every error it gives in `refused`. QuietServer is the server class under them all, and under the
doubles that write their own handler (HandlerDouble: tests/hf_hub_double.py, test_fetch_madqa's
PDF server).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

Response = tuple[int, list[tuple[str, str]], bytes]
"""(status, headers in the order they are sent, body). Content-Length is added after the headers,
in lower case when they all are."""

OnPost = Callable[[str, dict[str, str], bytes], Response]
"""(path with its query string, headers with lower-case names, raw body) -> Response."""

OnGet = Callable[[str], Response]
"""(path) -> Response; the request's body, if any, is not read."""

OnRequest = Callable[[str, str, dict[str, str], bytes], Response]
"""(method, path with its query string, headers with lower-case names, raw body) -> Response."""


class QuietServer(ThreadingHTTPServer):
    """A threaded server on which a client closing a kept-alive connection (or a killed client
    leaving a reply with nowhere to go) is normal: http.server would print a traceback to stderr,
    which a CLI test capturing stderr would read as the command's output. Any other error prints."""

    request_queue_size = 256  # the default backlog of 5 drops connections under load
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


class QuietHandler(BaseHTTPRequestHandler):
    """An HTTP/1.1 handler (keep-alive, as the real APIs) that logs nothing to stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass


class HandlerDouble:
    """Base class of the doubles that write their own request handler (tests/hf_hub_double.py,
    test_fetch_madqa's PDF server): serves `handler` on a QuietServer from entering a `with` block
    until leaving it, which first sets `release` (a request held on it then ends)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.release = threading.Event()
        self.server = QuietServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class _Handler(QuietHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        raw = self.rfile.read(int(self.headers.get("content-length", 0) or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._reply(self.server.on_post(self.path, headers, raw))

    def _reply(self, response: Response) -> None:
        status, headers, body = response
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        # Spelled like the other headers: SimAnthropic sends its own in lower case, as the API does.
        lower = bool(headers) and all(key.islower() for key, _ in headers)
        self.send_header("content-length" if lower else "Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _GetHandler(_Handler):
    def do_GET(self) -> None:  # noqa: N802
        assert self.server.on_get is not None
        self._reply(self.server.on_get(self.path))


class _Server(QuietServer):
    def __init__(self, on_post: OnPost, on_get: OnGet | None) -> None:
        self.on_post = on_post
        self.on_get = on_get
        # Without on_get, a GET gets http.server's own 501 "Unsupported method".
        super().__init__(("127.0.0.1", 0), _GetHandler if on_get is not None else _Handler)


class LocalJsonServer:
    """A threaded HTTP/1.1 server on 127.0.0.1: bound when made, serving from start() (or entering a
    `with` block) until close() (or leaving it).

    poll_interval is how often serve_forever looks for shutdown(): leaving the block waits for it."""

    def __init__(self, on_post: OnPost, on_get: OnGet | None = None, *, poll_interval: float = 0.5) -> None:
        self._server = _Server(on_post, on_get)
        self._poll_interval = poll_interval

    @property
    def port(self) -> int:
        return self._server.server_port

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalJsonServer:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": self._poll_interval},
                         daemon=True).start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalJsonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServedDouble:
    """Base class of the doubles: entering one starts a LocalJsonServer on its _handle (made by
    _http_server, which a double overrides to serve GET or poll faster), leaving it stops the server.
    The subclass declares the `_server` field (a dataclass field, default None)."""

    _server: LocalJsonServer | None

    def _handle(self, path: str, headers: dict[str, str], raw: bytes) -> Response:
        raise NotImplementedError

    def _http_server(self) -> LocalJsonServer:
        return LocalJsonServer(self._handle)

    @property
    def _url(self) -> str:
        """http://127.0.0.1:<port> of the running server."""
        assert self._server is not None, f"use {type(self).__name__} as a context manager"
        return self._server.url

    def __enter__(self) -> Self:
        self._server = self._http_server().start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


class _AnyMethod(QuietHandler):
    server: _MethodServer

    def _serve(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0) or 0))
        status, headers, body = self.server.on_request(self.command, self.path,
                                                       {k.lower(): v for k, v in self.headers.items()}, raw)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = do_PATCH = _serve  # noqa: N815


class _MethodServer(QuietServer):
    def __init__(self, on_request: OnRequest) -> None:
        self.on_request = on_request
        super().__init__(("127.0.0.1", 0), _AnyMethod)


class MethodServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 handing every request's (method, path, headers,
    body) to a callback (LocalJsonServer serves POST and GET only), from start() until close()."""

    def __init__(self, on_request: OnRequest) -> None:
        self._server = _MethodServer(on_request)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> MethodServer:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


Routed = tuple[int, Any] | tuple[int, Any, list[tuple[str, str]]]
"""A MethodDouble's answer: (status, a JSON body or bytes[, headers added after Content-Type])."""


@dataclass
class MethodDouble:
    """Base class of the REST simulators (dataclasses): `with sim:` serves _handle on a MethodServer
    for the block. The fields here are keyword-only, so that a subclass's own fields come first."""

    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1), kw_only=True, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, kw_only=True, repr=False)
    _server: MethodServer | None = field(default=None, kw_only=True, repr=False)

    def _id(self, prefix: str) -> str:
        """A new object id: the prefix and a counter."""
        return f"{prefix}{next(self._ids):06d}"

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response:
        raise NotImplementedError

    @property
    def _url(self) -> str:
        """http://127.0.0.1:<port> of the running server."""
        assert self._server is not None, f"use {type(self).__name__} as a context manager"
        return self._server.url

    def __enter__(self) -> Self:
        self._server = MethodServer(self._handle).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


@dataclass
class JsonMethodDouble(MethodDouble):
    """A MethodDouble whose _handle routes each request under the lock, sends bytes as
    application/octet-stream and any other body as JSON (CONTENT_TYPE), and records each answer of
    400 or more as (method, path, status, the error's {"error": {"message"}}) in `refused`. The
    subclass writes _route."""

    CONTENT_TYPE: ClassVar[str] = "application/json"
    refused: list[tuple[str, str, int, str]] = field(default_factory=list, kw_only=True)

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Routed:
        raise NotImplementedError

    def _extra_headers(self, status: int, body: Any) -> list[tuple[str, str]]:
        """Headers every JSON answer of this kind carries (none by default)."""
        return []

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response:
        with self._lock:
            routed = self._route(method, path, headers, raw)
        status, body = routed[0], routed[1]
        extra = routed[2] if len(routed) == 3 else []
        if isinstance(body, bytes):
            return status, [("Content-Type", "application/octet-stream"), *extra], body
        if status >= 400:
            self.refused.append((method, path, status, body["error"]["message"]))
        return (status, [("Content-Type", self.CONTENT_TYPE), *extra, *self._extra_headers(status, body)],
                json.dumps(body).encode())


def multipart(headers: dict[str, str], raw: bytes) -> dict[str, tuple[str | None, bytes]] | None:
    """A multipart/form-data body's fields: name -> (filename, bytes); None when it is not one."""
    ctype = headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        return None
    msg = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + raw)
    if not msg.is_multipart():
        return None
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if name:
            out[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return out


def b64decode_strict(data: str) -> bytes | None:
    """The bytes of a base64 string from a request body, or None when it is not valid base64."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
