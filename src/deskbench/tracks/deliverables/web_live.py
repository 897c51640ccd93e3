"""The live web (`--web brave`): a search API (Brave Search) and pages fetched over HTTP, used only when a user asks for it."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

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


IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Blocked = Callable[[IpAddress], bool]
MAX_REDIRECTS = 5


def private_address(ip: IpAddress) -> bool:
    """An address a model's fetch must not reach: this machine, its network, link-local (cloud
    metadata at 169.254.169.254), reserved, multicast; an IPv4-mapped IPv6 address as its IPv4."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast
            or ip.is_unspecified)


def _literal(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _guarded_resolver(blocked: Blocked) -> Any:
    """aiohttp's resolver, refusing a name when any address it resolves to is blocked: checked on
    the addresses actually connected to, so a public name that resolves (or re-resolves, DNS
    rebinding) to a private address is refused like the address itself."""
    from aiohttp.abc import AbstractResolver
    from aiohttp.resolver import DefaultResolver

    class GuardedResolver(AbstractResolver):
        def __init__(self) -> None:
            self._inner = DefaultResolver()

        async def resolve(self, host: str, port: int = 0, family: Any = 0) -> Any:
            found = await self._inner.resolve(host, port, family)
            for entry in found:
                ip = _literal(entry["host"])
                if ip is None or blocked(ip):
                    raise OSError(errno.EACCES, f"{host} resolves to {entry['host']}, a local or private address")
            return found

        async def close(self) -> None:
            await self._inner.close()

    return GuardedResolver()


class LiveWeb:
    """Search through a `SearchApi`; pages fetched over HTTP(S) with aiohttp: `timeout` seconds
    per request, at most `max_bytes` read, at most 5 redirects, no key sent to the page, and no
    address `blocked` says no to (default: loopback, private, link-local, reserved; a model should not
    reach the local network), checked on every hop of a redirect and on every address a name
    resolves to. `allow_private` turns the guard off (tests against a local double)."""

    def __init__(self, api: SearchApi, *, timeout: float = 20.0, max_bytes: int = 3_000_000,
                 allow_private: bool = False, blocked: Blocked = private_address) -> None:
        self.api = api
        self.name = api.name
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.blocked: Blocked | None = None if allow_private else blocked
        self._session: Any = None
        self._pages: Any = None

    def _client(self) -> Any:
        """The session for the search API (its own endpoint, not a model's choice)."""
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"User-Agent": "deskbench-deliverable-agent/0.1"})
        return self._session

    def _page_client(self) -> Any:
        """The session for pages a model asks for: names resolved through the guard."""
        import aiohttp

        if self.blocked is None:
            return self._client()
        if self._pages is None:
            self._pages = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(resolver=_guarded_resolver(self.blocked)),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers={"User-Agent": "deskbench-deliverable-agent/0.1"})
        return self._pages

    def _check_url(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WebError(f"{url!r} is not an http(s) URL")
        if self.blocked is None:
            return
        host = parts.hostname
        ip = _literal(host)
        if host == "localhost" or host.endswith(".localhost") or (ip is not None and self.blocked(ip)):
            raise WebError(f"{url} is on a local or private address, which fetch does not reach")

    async def search(self, query: str, count: int) -> list[SearchHit]:
        import aiohttp

        try:
            return await self.api.search(self._client(), query, count)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise WebUnavailable(f"{self.api.name} search could not be reached: {describe_problem(exc)}") from None

    async def fetch(self, url: str) -> Page:
        import aiohttp

        asked, hops = url, 0
        try:
            while True:  # redirects one hop at a time, each checked before it is followed
                self._check_url(url)
                async with self._page_client().get(url, allow_redirects=False) as resp:
                    location = resp.headers.get("Location")
                    if resp.status in (301, 302, 303, 307, 308) and location:
                        hops += 1
                        if hops > MAX_REDIRECTS:
                            raise WebError(f"{asked} redirects more than {MAX_REDIRECTS} times")
                        url = urljoin(url, location)
                        continue
                    chunks, size = [], 0
                    async for chunk in resp.content.iter_chunked(65536):
                        chunks.append(chunk)
                        size += len(chunk)
                        if size >= self.max_bytes:
                            break
                    raw = b"".join(chunks)[: self.max_bytes]
                    status, final, ctype = resp.status, str(resp.url), resp.headers.get("Content-Type", "")
                    break
        except (aiohttp.ClientError, TimeoutError) as exc:
            problem = describe_problem(exc) or type(exc).__name__
            if "a local or private address" in problem:
                raise WebError(f"{url} is on a local or private address, which fetch does not reach ({problem})") from None
            raise WebError(f"{url} could not be fetched: {problem}") from None
        if status >= 400:
            raise WebError(f"{url} answered HTTP {status}")
        text = page_text(raw, ctype)
        if size >= self.max_bytes:
            text += f"\n[... the page is larger than {self.max_bytes} bytes; the rest was not read]"
        return Page(url=final, status=status, content_type=ctype, text=text)

    async def aclose(self) -> None:
        for session in (self._session, self._pages):
            if session is not None:
                await session.close()
        self._session = self._pages = None
