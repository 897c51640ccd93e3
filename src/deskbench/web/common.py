"""What every deskbench web app shares: security headers, the session and CSRF checks, form
parsing, the static files and the login / logout screens (one home for the access rules).

Failed logins are throttled per client address and per user the token names (web/store.py
Backoff: 429 with Retry-After, counted in the run's SQLite so a restart forgets nothing);
sessions end after `idle` seconds without a request and `absolute` seconds in all; cookies are
`Secure` when the request came over TLS. The rules are the app's `WebSecurity`
(`use_security`), read at request time, so the CLI sets them on any app after it is built."""

from __future__ import annotations

import hmac
import ipaddress
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs

import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from deskbench.web.store import Backoff, Expired, Session, SessionLimits, WebStore

HERE = Path(__file__).resolve().parent


def templates(*folders: Path) -> jinja2.Environment:
    """The Jinja2 environment of a deskbench web app: its own templates' folders first (a
    track's screens keep theirs in tracks/<name>/web/templates), then the core's (base.html,
    login.html); autoescaped, and a missing variable is an error, not an empty string."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader([*folders, HERE / "templates"]),
                              autoescape=True, undefined=jinja2.StrictUndefined)
SESSION_COOKIE = "deskbench_session"
LOGIN_COOKIE = "deskbench_login"
MAX_BODY = 64 * 1024
STATIC = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}
CSP = ("default-src 'none'; img-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

Render = Callable[..., HTMLResponse]
EXPIRED_NOTICE = {"idle": "Your session ended after a while without activity; log in again.",
                  "absolute": "Your session reached its maximum length; log in again."}


class Clock(Protocol):
    def __call__(self) -> float: ...


@dataclass(frozen=True)
class WebSecurity:
    """An app's login rules. `trust_proxy`: X-Forwarded-For / -Proto name the client and scheme
    (only behind a proxy that sets them; otherwise anyone could pick their address); `clock`:
    epoch seconds (tests move it instead of sleeping)."""

    limits: SessionLimits = SessionLimits()
    backoff: Backoff = Backoff()
    trust_proxy: bool = False
    clock: Clock = field(default=time.time)


def use_security(app: FastAPI, security: WebSecurity) -> None:
    app.state.security = security


def security_of(request: Request) -> WebSecurity:
    return getattr(request.app.state, "security", None) or WebSecurity()


def _forwarded(request: Request, header: str) -> str | None:
    """The last value of a proxy header: the one the trusted proxy itself appended."""
    value = request.headers.get(header)
    return value.rsplit(",", 1)[-1].strip() or None if value else None


def client_address(request: Request) -> str:
    """The throttle key of the client: its address (an IPv6 client's /64, which one host holds)."""
    host = request.client.host if request.client else "unknown"
    if security_of(request).trust_proxy:
        host = _forwarded(request, "x-forwarded-for") or host
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "addr:" + host[:100]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"addr:{ip.ipv4_mapped}"
        return f"addr:{ipaddress.ip_network(f'{ip}/64', strict=False)}"
    return f"addr:{ip}"


def over_tls(request: Request) -> bool:
    if request.url.scheme == "https":
        return True
    return security_of(request).trust_proxy and _forwarded(request, "x-forwarded-proto") == "https"


@dataclass(frozen=True)
class Access:
    """The checks a route runs: `session` (logged in), `form` (a parsed urlencoded body) and
    `posted` (session + form, after the CSRF check)."""

    session: Callable[[Request], Session]
    form: Callable[[Request], Awaitable[dict[str, str]]]
    posted: Callable[[Request], Awaitable[tuple[Session, dict[str, str]]]]


def install_basics(app: FastAPI, web: WebStore, render: Render) -> Access:
    """Add the headers middleware, /static, /favicon.ico, /login and /logout to `app`."""

    @app.middleware("http")
    async def headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    def session(request: Request) -> Session:
        rules = security_of(request)
        s = web.session(request.cookies.get(SESSION_COOKIE), at=rules.clock(), limits=rules.limits)
        if not isinstance(s, Session):
            if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
                where = f"/login?expired={s.reason}" if isinstance(s, Expired) else "/login"
                raise HTTPException(303, headers={"Location": where})
            raise HTTPException(401, "session expired; log in again" if s else "log in first")
        return s

    async def form(request: Request) -> dict[str, str]:
        body = await request.body()
        if len(body) > MAX_BODY:
            raise HTTPException(413, "form too large")
        try:
            parsed = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=50)
        except (UnicodeDecodeError, ValueError) as exc:
            raise HTTPException(400, "bad form") from exc
        return {k: v[0] for k, v in parsed.items()}

    async def posted(request: Request) -> tuple[Session, dict[str, str]]:
        """The session and form of a POST, after the CSRF check."""
        s = session(request)
        data = await form(request)
        if not hmac.compare_digest(data.get("csrf", ""), s.csrf):
            raise HTTPException(403, "missing or wrong CSRF token")
        return s, data

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC:  # a fixed table: no name reaches the filesystem
            raise HTTPException(404)
        return Response((HERE / "static" / name).read_bytes(), media_type=STATIC[name],
                        headers={"Cache-Control": "private, max-age=300"})

    @app.get("/favicon.ico")
    def favicon() -> Response:  # browsers ask for it; nothing to send
        return Response(status_code=204)

    def login_page(request: Request, status: int = 200, error: str = "", notice: str = "") -> HTMLResponse:
        token = secrets.token_urlsafe(24)
        response = render("login.html", status, csrf=token, error=error, notice=notice, user=None)
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/login",
                            secure=over_tls(request))
        return response

    @app.get("/login")
    def login_form(request: Request) -> HTMLResponse:
        return login_page(request, notice=EXPIRED_NOTICE.get(request.query_params.get("expired", ""), ""))

    def throttled(request: Request, wait: float) -> HTMLResponse:
        seconds = max(1, math.ceil(wait))
        response = login_page(request, 429, f"Too many failed logins from this address or for this user: "
                                            f"try again in {_duration(seconds)}.")
        response.headers["Retry-After"] = str(seconds)
        return response

    @app.post("/login")
    async def login(request: Request) -> Response:
        data = await form(request)
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if not expected or not hmac.compare_digest(data.get("csrf", ""), expected):
            raise HTTPException(403, "missing or wrong CSRF token; reload the login page")
        rules = security_of(request)
        token = data.get("token", "")
        keys = [client_address(request), web.claimed_user(token)]
        at = rules.clock()
        wait = web.blocked_for(keys, at=at)
        if wait > 0:  # not checked: a blocked guess, right or wrong, learns nothing
            return throttled(request, wait)
        made = web.login(token, at=at, limits=rules.limits)
        if made is None:
            web.login_failed(keys, at=at, backoff=rules.backoff)
            return login_page(request, 401, "That token is not valid.")
        web.login_succeeded(keys)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, made[0], httponly=True, samesite="strict", path="/",
                            secure=over_tls(request))
        response.delete_cookie(LOGIN_COOKIE, path="/login", secure=over_tls(request), httponly=True,
                               samesite="strict")
        return response

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        await posted(request)
        web.logout(request.cookies.get(SESSION_COOKIE, ""))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=over_tls(request), httponly=True, samesite="strict")
        return response

    return Access(session=session, form=form, posted=posted)


def _duration(seconds: int) -> str:
    return f"{seconds} seconds" if seconds < 120 else f"{math.ceil(seconds / 60)} minutes"
