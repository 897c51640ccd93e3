"""The chat-completions POST on the wire, without the openai SDK's per-call machinery.

The SDK stays the client: it reads OPENAI_API_KEY / OPENAI_BASE_URL, checks the key, and says
which headers, base URL and timeout a request gets. Per call, though, its generic POST builds a
request-options model, parses the URL again, merges headers, runs the request through httpx2's
auth, redirect and transport layers into aiohttp and back: 0.5 ms of CPU a call on this machine
(bench_runtime's sdk_request_cpu_ms against a bare aiohttp POST), a third of the harness's cost
per model call. `DirectPost` sends the same bytes (the SDK's JSON encoding: compact separators,
UTF-8, no NaN) with the same headers on one aiohttp session, and maps a refusal to ModelError by
the same rules as the SDK's exceptions (models/sdk_errors.py).

It is used only for a client in the plain configuration deskbench builds: an API key as text,
no provider runtime (e.g. Azure), no workload identity, no key provider, no default query
parameters. Anything else (or an SDK without these attributes) keeps the SDK's own path.

`plain_post` goes one step further for that configuration: it works out the SDK's URL and
headers without importing the SDK at all (importing it builds ~1,000 pydantic response models:
1.5 s of CPU in every process that calls a model: each `deskbench run`, each Ray worker). It
mirrors the installed SDK's AsyncOpenAI (openai/lib/_client_auth.py, _base_client.py) for the
environment it understands and says None for anything else (an admin key, custom headers from
the environment, an unusual URL or platform), when the SDK is the client again.
tests/models/test_openai_plain.py holds it to the installed SDK's own headers.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import platform
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from deskbench.models.sdk_errors import status_error
from deskbench.models.types import Message, ModelError

# the client attributes that, when set, make the SDK do more than send the request as built here
_SPECIAL = ("_provider_runtime", "_workload_identity_auth", "_api_key_provider")
_MAX_CONNECTIONS = 1000  # the SDK's DEFAULT_CONNECTION_LIMITS


def direct_post(client: Any, path: str, timeout: float) -> DirectPost | None:
    """A DirectPost for `path` on an `openai.AsyncOpenAI` client, or None when the client is not in
    the plain configuration (see the module docstring)."""
    if any(not hasattr(client, name) or getattr(client, name) is not None for name in _SPECIAL):
        return None
    if not isinstance(getattr(client, "api_key", None), str) or client.default_query:
        return None
    from openai import Omit

    merged = {**client.auth_headers, **client.default_headers}  # the SDK's order: defaults win
    headers = {k: str(v) for k, v in merged.items() if not isinstance(v, Omit)}
    if not any(k.lower() == "authorization" for k in headers):
        return None  # the SDK refuses such a request with its own message: let it
    if "X-Stainless-Async" in headers:  # the SDK says it per request, from the running task
        headers["X-Stainless-Async"] = _ASYNC_PENDING
    return _post(str(client.base_url), path, headers, timeout)


def _post(base_url: str, path: str, headers: dict[str, str], timeout: float) -> DirectPost:
    """The DirectPost of `path` under `base_url`, with the headers the SDK adds to each request."""
    headers |= {"x-stainless-retry-count": "0", "x-stainless-read-timeout": str(timeout)}
    return DirectPost(f"{base_url.rstrip('/')}/{path.lstrip('/')}", headers, timeout)


# a base URL the SDK's URL normalisation (httpx) leaves as it is: lower-case host, no default
# port, user info, query, fragment, escapes or dot segments
_PLAIN_URL = re.compile(r"(?P<scheme>https?)://(?P<host>[a-z0-9][a-z0-9.-]*|\[[0-9a-f:.]+\])(?::(?P<port>[1-9]\d{0,4}))?"
                        r"(?P<path>(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*/?)")
_DEFAULT_PORT = {"http": "80", "https": "443"}
# the environment the SDK reads beyond key, base URL, organisation and project: each changes what it sends
_NOT_PLAIN_ENV = ("OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS")


def plain_post(api_key: str | None, base_url: str | None, path: str, timeout: float) -> DirectPost | None:
    """The DirectPost an `openai.AsyncOpenAI(api_key=..., base_url=...)` client would give
    (`direct_post`), worked out without importing the SDK; None when the settings or the
    environment are not the plain configuration mirrored here (the SDK is then the client: it
    also words a missing key's refusal)."""
    if api_key is None:
        api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key or any(name in os.environ for name in _NOT_PLAIN_ENV):
        return None
    if base_url is None:
        base_url = os.environ.get("OPENAI_BASE_URL")
    url = _plain_url("https://api.openai.com/v1" if base_url is None else base_url)
    known = _sdk_identity()
    if url is None or known is None:
        return None
    version, os_name, arch = known
    organization, project = os.environ.get("OPENAI_ORG_ID"), os.environ.get("OPENAI_PROJECT_ID")
    headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
               "Content-Type": "application/json", "User-Agent": f"AsyncOpenAI/Python {version}",
               "X-Stainless-Lang": "python", "X-Stainless-Package-Version": version, "X-Stainless-OS": os_name,
               "X-Stainless-Arch": arch, "X-Stainless-Runtime": platform.python_implementation(),
               "X-Stainless-Runtime-Version": platform.python_version(),
               "X-Stainless-Async": _ASYNC_PENDING,  # known in the event loop (DirectPost._session_here)
               **({} if organization is None else {"OpenAI-Organization": organization}),
               **({} if project is None else {"OpenAI-Project": project})}
    return _post(url, path, headers, timeout)


def _plain_url(url: str) -> str | None:
    m = _PLAIN_URL.fullmatch(url)
    if m is None or m["port"] == _DEFAULT_PORT[m["scheme"]] or len(m["port"] or "") == 5 and int(m["port"]) > 65535:
        return None
    return url


@functools.cache
def _sdk_identity() -> tuple[str, str, str] | None:
    """(SDK version, X-Stainless-OS, X-Stainless-Arch) as the installed SDK says them, read from
    its files and the platform without importing it; None when it is not installed or its
    version is not where this looks, or the platform is one the SDK names in ways not mirrored."""
    spec = importlib.util.find_spec("openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(next(iter(spec.submodule_search_locations))) / "_version.py").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    os_name, arch = _sdk_os(), _sdk_arch()
    if found is None or os_name is None or arch is None:
        return None
    return found[1], os_name, arch


def _sdk_os() -> str | None:
    """openai._base_client.get_platform for Linux, macOS and Windows; None elsewhere."""
    try:
        system, name = platform.system().lower(), platform.platform().lower()
    except Exception:  # noqa: BLE001 - the SDK says "Unknown" then: not mirrored
        return None
    if "iphone" in name or "ipad" in name or "android" in name:
        return None
    if system == "darwin":
        return "MacOS"
    if system == "windows":
        return "Windows"
    if system == "linux":
        try:
            distro = platform.freedesktop_os_release().get("ID", "").lower()
        except OSError:
            distro = ""
        return None if distro in ("freebsd", "openbsd") else "Linux"
    return None


def _sdk_arch() -> str | None:
    """openai._base_client.get_architecture for the machines it names; None elsewhere."""
    machine = platform.machine().lower()
    if machine in ("arm64", "aarch64"):
        return "arm64"
    if machine == "arm":
        return "arm"
    if machine == "x86_64":
        return "x64"
    return None


_ASYNC_PENDING = "async:pending"


def _async_library() -> str:
    """openai._utils.get_async_library: what runs the current task ("asyncio"), or "false"."""
    try:
        import sniffio

        return str(sniffio.current_async_library())
    except Exception:  # noqa: BLE001 - the SDK's own fallback
        return "false"


class DirectPost:
    """POSTs JSON bodies to one URL on an aiohttp session of the event loop that first used it."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        self.url = url
        self.headers = headers
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        # HTTP(S)_PROXY / NO_PROXY from the environment, as the SDK's client honours them, looked
        # up once: a session with trust_env looks them (and ~/.netrc) up in a worker thread on
        # every request, two thread hops a call
        self.proxy: URL | None = None
        self.proxy_auth: aiohttp.BasicAuth | None = None
        with contextlib.suppress(LookupError):
            self.proxy, self.proxy_auth = get_env_proxy_for_url(URL(url))

    def _session_here(self) -> aiohttp.ClientSession:
        if self.headers.get("X-Stainless-Async") == _ASYNC_PENDING:
            self.headers["X-Stainless-Async"] = f"async:{_async_library()}"
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=_MAX_CONNECTIONS), timeout=self.timeout)
        return self._session

    async def post(self, data: bytes) -> object:
        """The reply's JSON (or its text when it is not JSON: the caller's parser says what is
        wrong with it); a refusal, timeout or lost connection as ModelError."""
        try:
            async with self._session_here().post(self.url, data=data, headers=self.headers, proxy=self.proxy,
                                                 proxy_auth=self.proxy_auth) as response:
                raw = await response.read()
                status, reply_headers = response.status, response.headers
        except TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors too
            raise ModelError("request timed out", retryable=True) from exc
        except aiohttp.ClientError as exc:
            raise ModelError(f"connection failed: {exc or type(exc).__name__}", retryable=True) from exc
        text = raw.decode("utf-8", errors="replace")
        try:
            parsed: object = json.loads(text)
        except ValueError:
            parsed = text.strip() if status >= 400 else text
        if status >= 400:  # the SDK's exception, as _make_status_error_from_response builds it
            error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
            message = error.get("message") if isinstance(error, dict) else None
            raise status_error(status, error, reply_headers,
                               f"Error code: {status}" + (f" - {message}" if isinstance(message, str) and message else ""))
        return parsed

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def discard(self) -> None:
        """Forget the session without awaiting (its event loop is gone, or this object is): its
        pooled connections are closed where the loop still runs, and aiohttp's "Unclosed
        connector" warning, meant for a session forgotten by mistake, is not printed."""
        session, self._session = self._session, None
        if session is None or session.closed:
            return
        connector = session.connector
        session.detach()
        if connector is not None:
            connector._close()  # the synchronous part of BaseConnector.close()

    def __del__(self) -> None:
        self.discard()



def dumps(value: object) -> str:
    """JSON as the SDK encodes a request body (openai._utils._json.openapi_dumps)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class WireMessages:
    """Request bodies whose messages are encoded once each. A conversation sends every earlier
    message again on each call, so encoding the whole body costs O(history) per call (with full
    page texts, most of a call's CPU); each message's JSON is kept by the message's identity (the
    entry holds the message, so the identity cannot be reused; messages are not changed once
    made), the most recently used up to `chars` characters in all (page images are large)."""

    def __init__(self, wire: Callable[[Message], dict[str, Any]], chars: int = 32_000_000) -> None:
        self._wire = wire
        self._budget = chars
        self._chars = 0
        self._done: OrderedDict[int, tuple[Message, str]] = OrderedDict()

    def _encoded(self, message: Message) -> str:
        key = id(message)
        hit = self._done.get(key)
        if hit is not None and hit[0] is message:
            self._done.move_to_end(key)
            return hit[1]
        text = dumps(self._wire(message))
        if hit is not None:  # cannot be: the entry holds its message; kept consistent all the same
            self._chars -= len(self._done.pop(key)[1])
        self._done[key] = (message, text)
        self._chars += len(text)
        while self._chars > self._budget and self._done:
            self._chars -= len(self._done.popitem(last=False)[1][1])
        return text

    def body(self, model: str, messages: Sequence[Message], options: dict[str, Any]) -> bytes:
        """The bytes of dumps({"model": model, "messages": [...], **options})."""
        rest = dumps(options)[1:-1] if options else ""
        return "".join(('{"model":', dumps(model), ',"messages":[', ",".join(map(self._encoded, messages)), "]",
                        "," if rest else "", rest, "}")).encode()
