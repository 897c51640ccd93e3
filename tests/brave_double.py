"""A local stand-in for the Brave Search API's web search, with the rules the API documents, and a
few plain web pages to fetch, on 127.0.0.1.

GET /res/v1/web/search?q=...&count=N:
* the key must be in the X-Subscription-Token header: missing or wrong -> `invalid_status` (401;
  the live API has also been seen answering 422) with code SUBSCRIPTION_TOKEN_INVALID;
* `q` must be non-empty and `count` 1..20 -> else 422 VALIDATION;
* past `rate_limit` requests -> 429 RATE_LIMITED, with X-RateLimit-Limit/Remaining/Reset headers;
* errors are {"type": "ErrorResponse", "error": {"id", "status", "code", "detail", "meta"}, "time"};
* 200 is {"type": "search", "query": {"original": q}, "web": {"type": "search", "results": [...]}}.
Any other GET path serves `pages[path]` = (status, content type, body), or 404; a path in `slow`
waits 2 s first. Every request's path and headers (lower-case names) are kept in `requests`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

SEARCH_PATH = "/res/v1/web/search"


def brave_error(status: int, code: str, detail: str, meta: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"type": "ErrorResponse",
                       "error": {"id": str(uuid.uuid4()), "status": status, "code": code, "detail": detail,
                                 "meta": meta or {}},
                       "time": int(time.time())}).encode()


@dataclass
class BraveDouble:
    key: str = "test-key"
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pages: dict[str, tuple[int, str, bytes]] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)  # path -> Location of a 302
    rate_limit: int | None = None  # searches answered before every further one is a 429
    invalid_status: int = 401
    slow: set[str] = field(default_factory=set)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    searches: int = 0
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def endpoint(self) -> str:
        return self.url + SEARCH_PATH

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
        self.requests.append((path, headers))
        parts = urlsplit(path)
        if parts.path != SEARCH_PATH:
            if parts.path in self.slow:
                time.sleep(2)
            if parts.path in self.redirects:
                return 302, [("Location", self.redirects[parts.path]), ("Content-Type", "text/html")], b""
            status, ctype, body = self.pages.get(parts.path, (404, "text/html", b"<h1>Not found</h1>"))
            return status, [("Content-Type", ctype)], body
        json_type = [("Content-Type", "application/json")]
        if headers.get("x-subscription-token") != self.key:
            return self.invalid_status, json_type, brave_error(
                self.invalid_status, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.")
        query = parse_qs(parts.query)
        q = (query.get("q") or [""])[0]
        count = (query.get("count") or ["20"])[0]
        if not q.strip() or not count.isdigit() or not 1 <= int(count) <= 20:
            return 422, json_type, brave_error(422, "VALIDATION", "Unable to validate request parameter(s)")
        self.searches += 1
        if self.rate_limit is not None and self.searches > self.rate_limit:
            limits = [("X-RateLimit-Limit", "1, 15000"), ("X-RateLimit-Remaining", "0, 14000"),
                      ("X-RateLimit-Reset", "1, 1419704")]
            return 429, json_type + limits, brave_error(
                429, "RATE_LIMITED", "Request rate limit exceeded for plan",
                {"plan": "Free", "rate_limit": 1, "rate_current": 1, "component": "rate_limiter"})
        hits = self.results.get(q, [])[: int(count)]
        body = {"type": "search", "query": {"original": q},
                "web": {"type": "search", "results": [{"type": "search_result", **h} for h in hits]}}
        return 200, json_type, json.dumps(body).encode()

    def __enter__(self) -> BraveDouble:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                status, headers, body = double.answer(self.path, {k.lower(): v for k, v in self.headers.items()})
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that gave up
                    self.wfile.write(body)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
