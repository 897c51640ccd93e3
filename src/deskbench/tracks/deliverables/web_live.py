"""The live web (`--web brave`): a search API (Brave Search) and pages fetched over HTTP, used only when a user asks for it."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from deskbench.agents.base import describe_problem
from deskbench.tracks.deliverables.web_backend import Page, SearchHit, WebError, WebUnavailable
from deskbench.tracks.deliverables.web_page_text import html_to_text, page_text

BRAVE_KEY_ENV = "BRAVE_SEARCH_API_KEY"
BRAVE_ENDPOINT = "https://api.search.brave.com/res/v1/web/search"


class SearchApi(Protocol):
    """A web search HTTP API (Brave Search): a query in, hits out."""

    name: str

    async def search(self, session: Any, query: str, count: int) -> list[SearchHit]: ...


def _first_number(value: str | None) -> float | None:
    m = re.match(r"\s*(\d+(?:\.\d+)?)", value or "")
    return float(m.group(1)) if m else None


@dataclass
class BraveSearch:
    """Brave Search API web search: GET {endpoint}?q=...&count=N (at most 20), the key in
    X-Subscription-Token; hits are `web.results[]` (title, url, description). Errors come as
    {"type": "ErrorResponse", "error": {"status", "code", "detail", ...}}: a rejected key
    (401/403, or code SUBSCRIPTION_TOKEN_INVALID) ends the episode; 429 (RATE_LIMITED) is retried
    after X-RateLimit-Reset (or Retry-After) seconds, at most `retries` times."""

    key: str
    endpoint: str = BRAVE_ENDPOINT
    retries: int = 3
    max_wait: float = 10.0
    name: str = "brave"
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def search(self, session: Any, query: str, count: int) -> list[SearchHit]:
        params = {"q": query, "count": str(max(1, min(count, 20)))}
        headers = {"Accept": "application/json", "X-Subscription-Token": self.key}
        for attempt in range(self.retries + 1):
            async with session.get(self.endpoint, params=params, headers=headers) as resp:
                body = await resp.read()
                status = resp.status
                reset = _first_number(resp.headers.get("X-RateLimit-Reset")) or _first_number(
                    resp.headers.get("Retry-After"))
            if status == 200:
                return self._hits(body)
            code, detail = self._error(body)
            if status in (401, 403) or code == "SUBSCRIPTION_TOKEN_INVALID":
                raise WebUnavailable(f"Brave Search rejected the key in ${BRAVE_KEY_ENV} ({status} {code}: {detail})")
            if status == 429 and attempt < self.retries:
                await self.sleep(min(self.max_wait, reset if reset is not None else 2.0 ** attempt))
                continue
            if status == 429 or status >= 500:
                raise WebUnavailable(f"Brave Search failed: {status} {code}: {detail}")
            raise WebError(f"the search was refused: {status} {code}: {detail}")
        raise AssertionError("unreachable")

    @staticmethod
    def _error(body: bytes) -> tuple[str, str]:
        try:
            err = json.loads(body).get("error") or {}
            return str(err.get("code", "")), str(err.get("detail", ""))
        except (ValueError, AttributeError):
            return "", body[:200].decode("utf-8", errors="replace")

    @staticmethod
    def _hits(body: bytes) -> list[SearchHit]:
        try:
            data = json.loads(body)
            results = (data.get("web") or {}).get("results") or []
            return [SearchHit(title=str(r.get("title", "")), url=str(r["url"]),
                              snippet=html_to_text(str(r.get("description", ""))))
                    for r in results if isinstance(r, dict) and r.get("url")]
        except (ValueError, AttributeError) as exc:
            raise WebUnavailable(f"Brave Search answered something that is not its JSON: {exc}") from None


SEARCH_APIS: dict[str, Callable[[str], SearchApi]] = {"brave": lambda key: BraveSearch(key=key)}
SEARCH_KEYS: dict[str, str] = {"brave": BRAVE_KEY_ENV}


def _private_host(host: str) -> bool:
    if host in ("localhost", "") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved


class LiveWeb:
    """Search through a `SearchApi`; pages fetched over HTTP(S) with aiohttp: `timeout` seconds
    per request, at most `max_bytes` read, at most 5 redirects, no key sent to the page, and no
    loopback/private address unless `allow_private` (a model should not reach the local network)."""

    def __init__(self, api: SearchApi, *, timeout: float = 20.0, max_bytes: int = 3_000_000,
                 allow_private: bool = False) -> None:
        self.api = api
        self.name = api.name
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.allow_private = allow_private
        self._session: Any = None

    def _client(self) -> Any:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"User-Agent": "deskbench-deliverable-agent/0.1"})
        return self._session

    async def search(self, query: str, count: int) -> list[SearchHit]:
        import aiohttp

        try:
            return await self.api.search(self._client(), query, count)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise WebUnavailable(f"{self.api.name} search could not be reached: {describe_problem(exc)}") from None

    async def fetch(self, url: str) -> Page:
        import aiohttp

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WebError(f"{url!r} is not an http(s) URL")
        if not self.allow_private and _private_host(parts.hostname):
            raise WebError(f"{url} is on a local or private address, which fetch does not reach")
        try:
            async with self._client().get(url, max_redirects=5) as resp:
                chunks, size = [], 0
                async for chunk in resp.content.iter_chunked(65536):
                    chunks.append(chunk)
                    size += len(chunk)
                    if size >= self.max_bytes:
                        break
                raw = b"".join(chunks)[: self.max_bytes]
                status, final, ctype = resp.status, str(resp.url), resp.headers.get("Content-Type", "")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise WebError(f"{url} could not be fetched: {describe_problem(exc) or type(exc).__name__}") from None
        if status >= 400:
            raise WebError(f"{url} answered HTTP {status}")
        text = page_text(raw, ctype)
        if size >= self.max_bytes:
            text += f"\n[... the page is larger than {self.max_bytes} bytes; the rest was not read]"
        return Page(url=final, status=status, content_type=ctype, text=text)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
