"""Web access for the deliverables agent (consulting DRA paper §3.4, Table 5): `web_search` and
`fetch` tools over a `WebBackend`.

The paper's agents searched the live web (Claude's web_search, o3's browser, Gemini's grounded
search); FSP tasks need a live figure (Appendix A.5: the VLSFO price) and hybrid CRP tasks one
authorized external source. Two backends, chosen with `deskbench run --web`:

* `recorded:DIR` (`RecordedWeb`): a folder of saved pages and search results, for tests and for
  reproducible runs. Nothing leaves the machine; a URL or query that is not recorded is answered
  as a miss, the same way every time. The format of DIR:

      DIR/index.jsonl   one JSON object per line, either
        {"kind": "page", "url": "https://www.example.com/report", "file": "pages/report.html",
         "content_type": "text/html", "status": 200}
        {"kind": "search", "query": "vlsfo global 20 ports average",
         "results": [{"title": "...", "url": "https://...", "snippet": "..."}]}
      DIR/pages/...     the page files the "page" lines name (paths relative to DIR)

  URLs match without their #fragment, with scheme and host in any case and with or without a
  trailing slash; queries match case-insensitively with runs of spaces as one. A page is turned
  into text as a live one is (HTML, plain text, JSON/XML/CSV, PDF). `--web-record DIR` writes
  this format from a live run, so that run can be replayed.
* `brave` (`LiveWeb` over `BraveSearch`): the Brave Search API's web search (GET
  /res/v1/web/search, key in the X-Subscription-Token header, from $BRAVE_SEARCH_API_KEY), and
  pages fetched over HTTP with a timeout and a size cap. Only used when a user asks for it.

Every call and what it returned (hits; the page's URL, status and the text shown) is a
ToolCallStep of the episode, so each URL a deliverable cites can be traced to a fetch.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from deskbench.agents.base import Recorder, describe_problem
from deskbench.errors import UserError
from deskbench.models.types import ToolCall, ToolSpec
from deskbench.tasks.docqa import ToolCallStep

PAGE_CHARS = 20_000  # page text shown to the model per fetch (the rest is cut, and said to be)
MAX_RESULTS = 10  # hits per web_search call
BRAVE_KEY_ENV = "BRAVE_SEARCH_API_KEY"
BRAVE_ENDPOINT = "https://api.search.brave.com/res/v1/web/search"


class WebError(Exception):
    """A miss the agent reads as the tool's answer (page not found, not text, too slow)."""


class WebUnavailable(Exception):
    """The backend itself failed (key rejected, rate limit that did not clear): the episode ends
    as an error, since a run without the web it was configured with measures something else."""


class SearchHit(BaseModel):
    title: str = ""
    url: str
    snippet: str = ""


class Page(BaseModel):
    url: str  # after redirects
    status: int
    content_type: str
    text: str


class WebBackend(Protocol):
    """What the web tools call; `name` goes into the trajectory."""

    name: str

    async def search(self, query: str, count: int) -> list[SearchHit]: ...

    async def fetch(self, url: str) -> Page: ...

    async def aclose(self) -> None: ...


# ---- page text -------------------------------------------------------------------------------

_SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe"}
_BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "section",
          "article", "header", "footer", "ul", "ol", "pre", "blockquote", "dd", "dt", "hr", "main",
          "nav", "aside", "figure", "figcaption", "form", "caption"}


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.skip = 0
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag in _SKIP:
            self.skip += 1
        elif tag in _BLOCK:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append("\t")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in _SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Readable text of an HTML page (title first; scripts, styles and <head> dropped; one line
    per block, table cells tab-separated). The standard library's parser: no dependency."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    lines = [re.sub(r" ?\t[ \t]*", "\t", re.sub(r"[ \r\f\v\xa0]+", " ", line)).strip()
             for line in "".join(parser.parts).split("\n")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(parser.title).split())
    return f"{title}\n\n{body}" if title else body


def _decode(raw: bytes, content_type: str) -> str:
    m = re.search(r"charset=([\w.-]+)", content_type, re.IGNORECASE)
    try:
        return raw.decode(m.group(1) if m else "utf-8", errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def _pdf_text(raw: bytes, content_type: str) -> str:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(raw)
    try:
        return "\n\n".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    finally:
        pdf.close()


PAGE_READERS: dict[str, Callable[[bytes, str], str]] = {
    "text/html": lambda raw, ct: html_to_text(_decode(raw, ct)),
    "application/xhtml+xml": lambda raw, ct: html_to_text(_decode(raw, ct)),
    "text/plain": _decode,
    "text/csv": _decode,
    "text/markdown": _decode,
    "application/json": _decode,
    "application/xml": _decode,
    "text/xml": _decode,
    "application/pdf": _pdf_text,
}
"""Media type -> text. A type not here is refused (the agent is told what it was)."""


def page_text(raw: bytes, content_type: str) -> str:
    kind = content_type.split(";")[0].strip().lower() or "text/html"
    reader = PAGE_READERS.get(kind)
    if reader is None:
        raise WebError(f"the page is {kind}, which cannot be read as text")
    try:
        return reader(raw, content_type)
    except WebError:
        raise
    except Exception as exc:  # a broken PDF, say: the agent reads that it failed
        raise WebError(f"the page ({kind}) could not be read: {describe_problem(exc)}") from None


# ---- matching --------------------------------------------------------------------------------

def url_key(url: str) -> str:
    """The form two URLs are compared in: no fragment, scheme and host lower-case, no trailing /."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def query_key(query: str) -> str:
    return " ".join(query.casefold().split())


# ---- the recorded backend --------------------------------------------------------------------

class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordedPage(_Line):
    """A saved page: `file` (relative to the folder) holds the bytes served for `url`."""

    kind: Literal["page"] = "page"
    url: str = Field(min_length=1)
    file: str = Field(min_length=1)
    content_type: str = "text/html"
    status: int = 200


class RecordedSearch(_Line):
    """A saved search: the hits `query` returned, best first."""

    kind: Literal["search"] = "search"
    query: str = Field(min_length=1)
    results: list[SearchHit] = Field(default_factory=list)


RecordedLine = Annotated[RecordedPage | RecordedSearch, Field(discriminator="kind")]
_LINE = TypeAdapter(RecordedLine)
INDEX = "index.jsonl"


def read_recording(folder: Path) -> tuple[dict[str, RecordedPage], dict[str, RecordedSearch]]:
    """The index of a recorded web folder, validated; a bad line is a UserError naming it."""
    index = folder / INDEX
    if not index.is_file():
        raise UserError(f"--web recorded:{folder}: no {INDEX} in that folder; record one with --web-record "
                        "or write it (format: deskbench.tracks.deliverables.web_access)")
    pages: dict[str, RecordedPage] = {}
    searches: dict[str, RecordedSearch] = {}
    root = folder.resolve()
    for n, line in enumerate(index.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{index} line {n}"
        try:
            item = _LINE.validate_json(line)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in err["loc"]) or "(the line)"
            raise UserError(f"{where}: field '{field}': {err['msg']}; fix the line "
                            "(a page: kind, url, file; a search: kind, query, results)") from None
        if isinstance(item, RecordedPage):
            path = (folder / item.file).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                raise UserError(f"{where}: file {item.file!r} is not a file inside {folder}; fix the path")
            pages[url_key(item.url)] = item
        else:
            searches[query_key(item.query)] = item
    return pages, searches


class RecordedWeb:
    """Saved pages and searches (the module docstring gives the format); reproducible, offline."""

    name = "recorded"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pages, self.searches = read_recording(folder)

    async def search(self, query: str, count: int) -> list[SearchHit]:
        found = self.searches.get(query_key(query))
        return found.results[:count] if found else []

    async def fetch(self, url: str) -> Page:
        page = self.pages.get(url_key(url))
        if page is None:
            raise WebError(f"{url} could not be reached (not in the recorded web)")
        raw = (self.folder / page.file).read_bytes()
        return Page(url=page.url, status=page.status, content_type=page.content_type,
                    text=page_text(raw, page.content_type))

    async def aclose(self) -> None:
        pass


class RecordingWeb:
    """A live backend whose searches and pages are also written to `folder` in the recorded
    format (pages as the text the agent read), so `--web recorded:FOLDER` replays the run."""

    def __init__(self, inner: WebBackend, folder: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.folder = folder
        (folder / "pages").mkdir(parents=True, exist_ok=True)

    def _append(self, line: RecordedPage | RecordedSearch) -> None:
        with (self.folder / INDEX).open("a", encoding="utf-8") as f:
            f.write(line.model_dump_json() + "\n")

    async def search(self, query: str, count: int) -> list[SearchHit]:
        hits = await self.inner.search(query, count)
        self._append(RecordedSearch(query=query, results=hits))
        return hits

    async def fetch(self, url: str) -> Page:
        page = await self.inner.fetch(url)
        name = f"pages/{hashlib.sha256(url_key(url).encode()).hexdigest()[:24]}.txt"
        (self.folder / name).write_text(page.text, encoding="utf-8")
        self._append(RecordedPage(url=url, file=name, content_type="text/plain; charset=utf-8", status=page.status))
        return page

    async def aclose(self) -> None:
        await self.inner.aclose()


# ---- the live backend ------------------------------------------------------------------------

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


# ---- choosing a backend (--web) --------------------------------------------------------------

@dataclass(frozen=True)
class WebChoice:
    """What `--web` asked for: `kind` (a WEB_KINDS key) and its argument (recorded: the folder)."""

    kind: str
    arg: str = ""
    record_to: Path | None = None  # --web-record: also save what a live backend returns

    @property
    def live(self) -> bool:
        return self.kind != "recorded"

    def describe(self) -> str:
        if not self.live:
            return f"recorded pages from {self.arg} (--web recorded:DIR): a frozen web, not live"
        saved = f", saved to {self.record_to}" if self.record_to else ""
        return f"live {self.kind} search and HTTP fetch (--web {self.kind}{saved})"


def parse_web(value: str, record_to: Path | None = None) -> WebChoice:
    """`--web recorded:DIR` or `--web brave`; anything else is refused in one line."""
    kind, _, arg = value.partition(":")
    if kind == "recorded":
        if not arg:
            raise UserError("--web recorded needs its folder: --web recorded:DIR")
        if record_to is not None:
            raise UserError("--web-record saves a live web; with --web recorded:DIR there is nothing new to save")
        read_recording(Path(arg))  # a bad folder fails now, not in the middle of the run
        return WebChoice("recorded", arg)
    if kind in SEARCH_APIS:
        if arg:
            raise UserError(f"--web {kind} takes no argument (its key comes from ${SEARCH_KEYS[kind]})")
        if not os.environ.get(SEARCH_KEYS[kind]):
            raise UserError(f"--web {kind} needs an API key in ${SEARCH_KEYS[kind]}; set it, or use --web recorded:DIR")
        return WebChoice(kind, record_to=record_to)
    raise UserError(f"--web {value!r} is not known; use recorded:DIR or one of: {', '.join(SEARCH_APIS)}")


def open_web(choice: WebChoice) -> WebBackend:
    if not choice.live:
        return RecordedWeb(Path(choice.arg))
    backend: WebBackend = LiveWeb(SEARCH_APIS[choice.kind](os.environ.get(SEARCH_KEYS[choice.kind], "")))
    return RecordingWeb(backend, choice.record_to) if choice.record_to else backend


# ---- the tools -------------------------------------------------------------------------------

SEARCH_TOOL = ToolSpec(
    name="web_search",
    description="Search the web. Returns up to `count` hits, each a title, URL and snippet.",
    parameters={"type": "object", "properties": {
        "query": {"type": "string", "description": "What to search for."},
        "count": {"type": "integer", "description": f"Hits wanted, 1 to {MAX_RESULTS} (default 5)."}},
        "required": ["query"]},
)
FETCH_TOOL = ToolSpec(
    name="fetch",
    description=f"Fetch a web page by URL and return it as text (at most {PAGE_CHARS} characters).",
    parameters={"type": "object", "properties": {"url": {"type": "string", "description": "An http(s) URL."}},
                "required": ["url"]},
)


class WebSearchTool:
    """`web_search` for the code loop: the hits as numbered lines; the call and hits recorded."""

    spec = SEARCH_TOOL

    def __init__(self, backend: WebBackend) -> None:
        self.backend = backend

    async def run(self, call: ToolCall, rec: Recorder) -> str:
        started = time.monotonic()
        try:
            args = call.parsed()
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ValueError("web_search needs a non-empty 'query' string")
            count = args.get("count", 5)
            count = max(1, min(int(count), MAX_RESULTS)) if isinstance(count, int | float) else 5
            hits = await self.backend.search(query, count)
        except (ValueError, WebError) as exc:
            problem = describe_problem(exc)
            rec.add(ToolCallStep(name=self.spec.name, arguments={"raw": call.arguments[:2000]},
                                 result={"backend": self.backend.name, "error": problem}))
            return f"error: {problem}"
        rec.add(ToolCallStep(name=self.spec.name, arguments={"query": query, "count": count},
                             result={"backend": self.backend.name, "results": [h.model_dump() for h in hits]},
                             seconds=round(time.monotonic() - started, 4)))
        if not hits:
            return f"no results for {query!r}"
        return "\n\n".join(f"[{i}] {h.title}\n{h.url}\n{h.snippet}".rstrip() for i, h in enumerate(hits, 1))


class FetchTool:
    """`fetch` for the code loop: the page as text, cut at PAGE_CHARS; the URL, status and the
    text shown recorded (an auditor sees what the agent read before it cited the page)."""

    spec = FETCH_TOOL

    def __init__(self, backend: WebBackend) -> None:
        self.backend = backend

    async def run(self, call: ToolCall, rec: Recorder) -> str:
        started = time.monotonic()
        url: object = None
        try:
            url = call.parsed().get("url")
            if not isinstance(url, str) or not url.strip():
                raise ValueError("fetch needs a non-empty 'url' string")
            page = await self.backend.fetch(url.strip())
        except (ValueError, WebError) as exc:
            problem = describe_problem(exc)
            args = {"url": url} if isinstance(url, str) else {"raw": call.arguments[:2000]}
            rec.add(ToolCallStep(name=self.spec.name, arguments=args,
                                 result={"backend": self.backend.name, "error": problem}))
            return f"error: {problem}"
        shown = page.text[:PAGE_CHARS]
        if len(page.text) > PAGE_CHARS:
            shown += f"\n[... truncated: {len(page.text) - PAGE_CHARS} more characters]"
        rec.add(ToolCallStep(
            name=self.spec.name, arguments={"url": url},
            result={"backend": self.backend.name, "url": page.url, "status": page.status,
                    "content_type": page.content_type, "chars": len(page.text),
                    "sha256": hashlib.sha256(page.text.encode()).hexdigest(), "text": shown},
            seconds=round(time.monotonic() - started, 4)))
        return f"{page.url}\n\n{shown}"


def web_tools(backend: WebBackend) -> list[WebSearchTool | FetchTool]:
    return [WebSearchTool(backend), FetchTool(backend)]
