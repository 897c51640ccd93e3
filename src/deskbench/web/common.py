"""What every deskbench web app shares: security headers, the session and CSRF checks, form
parsing, the static files and the login / logout screens (one home for the access rules)."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from deskbench.web.store import Session, WebStore

HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "deskbench_session"
LOGIN_COOKIE = "deskbench_login"
MAX_BODY = 64 * 1024
STATIC = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}
CSP = ("default-src 'none'; img-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

Render = Callable[..., HTMLResponse]


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
    async def headers(request: Request, call_next):  # noqa: ANN001, ANN202
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    def session(request: Request) -> Session:
        s = web.session(request.cookies.get(SESSION_COOKIE))
        if s is None:
            if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
                raise HTTPException(303, headers={"Location": "/login"})
            raise HTTPException(401, "log in first")
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

    def login_page(status: int = 200, error: str = "") -> HTMLResponse:
        token = secrets.token_urlsafe(24)
        response = render("login.html", status, csrf=token, error=error, user=None)
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/login")
        return response

    @app.get("/login")
    def login_form() -> HTMLResponse:
        return login_page()

    @app.post("/login")
    async def login(request: Request) -> Response:
        data = await form(request)
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if not expected or not hmac.compare_digest(data.get("csrf", ""), expected):
            raise HTTPException(403, "missing or wrong CSRF token; reload the login page")
        made = web.login(data.get("token", ""))
        if made is None:
            return login_page(401, "That token is not valid.")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, made[0], httponly=True, samesite="strict", path="/")
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        return response

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        await posted(request)
        web.logout(request.cookies.get(SESSION_COOKIE, ""))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return Access(session=session, form=form, posted=posted)
