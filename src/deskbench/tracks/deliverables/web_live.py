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


# IPv6 forms that carry an IPv4 address, and where the carried address sits
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the IPv4 in the last 32 bits
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use: not globally reachable
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d (:: and ::1 included: 0.0.0.0, 0.0.0.1)
IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT ::ffff:0:a.b.c.d (RFC 2765)
GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")  # the only IPv6 unicast space allocated for the internet
NOT_GLOBAL = tuple(ipaddress.ip_network(n) for n in (
    "100.64.0.0/10",  # carrier-grade NAT (a cloud's metadata service at 100.100.100.200)
    "192.0.0.0/24", "192.88.99.0/24",  # IETF protocol assignments, the deprecated 6to4 relay anycast
    "3fff::/20", "2001:db8::/32",  # documentation (3fff::/20 is RFC 9637, newer than some Pythons know)
))


def carried_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address] | None:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, translated, 6to4, Teredo's
    server and client, NAT64): a connection to it ends at them. None: it carries none."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # (server, client); the client's bits are XOR-ed, teredo undoes it
    if ip in NAT64 or ip in IPV4_COMPATIBLE or ip in IPV4_TRANSLATED:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)]
    return None


def _public(ip: IpAddress) -> bool:
    """Globally routable unicast, judged by the address itself (no unwrapping)."""
    if ip.is_multicast or ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_private:
        return False
    if any(ip in net for net in NOT_GLOBAL if net.version == ip.version):
        return False
    if isinstance(ip, ipaddress.IPv6Address) and (ip not in GLOBAL_UNICAST or ip.is_site_local):
        return False
    return ip.is_global and not ip.is_reserved


def private_address(ip: IpAddress) -> bool:
    """An address a model's fetch must not reach: anything not globally routable (this machine, its
    network, link-local and cloud metadata, carrier-grade NAT, site-local, reserved, multicast). An
    IPv6 address carrying an IPv4 one (IPv4-mapped, -compatible, 6to4, Teredo, NAT64) is judged by
    every IPv4 it carries; the local-use NAT64 prefix 64:ff9b:1::/48 is never global. Python's
    `is_global` alone is not enough (it calls fec0::/10, multicast and 6to4 global)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id or ip in NAT64_LOCAL:
            return True
        carried = carried_ipv4(ip)
        if carried is not None:
            return not all(_public(v4) for v4 in carried)
    return not _public(ip)


def _literal(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _guarded_resolver(blocked: Blocked, inner: Any = None) -> Any:
    """aiohttp's resolver (or `inner`, an aiohttp AbstractResolver), refusing a name when any
    address it resolves to is blocked. aiohttp connects to exactly the addresses this returns (one
    resolution per connection, its DNS cache holds only what passed here), so what is checked is
    what is connected to: a public name that resolves (or re-resolves, DNS rebinding) to a private
    address is refused like the address itself. IP literals never reach a resolver: `_check_url`."""
    from aiohttp.abc import AbstractResolver
    from aiohttp.resolver import DefaultResolver

    class GuardedResolver(AbstractResolver):
        def __init__(self) -> None:
            self._inner = inner if inner is not None else DefaultResolver()

        async def resolve(self, host: str, port: int = 0, family: Any = 0) -> Any:
            found = await self._inner.resolve(host, port, family)
            for entry in found:
                ip = _literal(entry["host"])
                if ip is None or blocked(ip):
                    raise OSError(errno.EACCES, f"{host} resolves to {entry['host']}, a local or private address (not globally routable)")
            return found

        async def close(self) -> None:
            await self._inner.close()

    return GuardedResolver()


class LiveWeb:
    """Search through a `SearchApi`; pages fetched over HTTP(S) with aiohttp: `timeout` seconds
    per request, at most `max_bytes` read, at most 5 redirects, no key sent to the page, and no
    address `blocked` says no to (default `private_address`: only globally routable addresses; a
    model should not reach the local network or a cloud's metadata service), checked on every hop
    of a redirect and on every address a name resolves to (`resolver`: an aiohttp resolver to ask
    instead of the system's, for tests). `allow_private` turns the guard off (tests against a local double)."""

    def __init__(self, api: SearchApi, *, timeout: float = 20.0, max_bytes: int = 3_000_000,
                 allow_private: bool = False, blocked: Blocked = private_address, resolver: Any = None) -> None:
        self.api = api
        self.name = api.name
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.blocked: Blocked | None = None if allow_private else blocked
        self.resolver = resolver
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
                connector=aiohttp.TCPConnector(resolver=_guarded_resolver(self.blocked, self.resolver)),
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
            raise WebError(f"{url} is on a local or private address (not globally routable), which fetch does not reach")

    async def search(self, query: str, count: int) -> list[SearchHit]:
        import aiohttp

        try:
            return await self.api.search(self._client(), query, count)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise WebUnavailable(f"{self.api.name} search could not be reached: {describe_problem(exc)}") from None

    async def fetch(self, url: str) -> Page:
        """The page at `url`; a refusal or failure is a WebError naming the URL without its
        credentials (userinfo, secret query values: deskbench.redact), as the trajectory keeps it."""
        from deskbench.redact import redact_text

        try:
            return await self._fetch(url)
        except WebError as exc:
            raise type(exc)(redact_text(str(exc))) from None

    async def _fetch(self, url: str) -> Page:
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
