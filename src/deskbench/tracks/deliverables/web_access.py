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
  this format from a live run, so that run can be replayed. The index is read under caps
  (tasks/jsonl.py WEB_INDEX: a regular file of at most 64 MB, 4 MB a line, UTF-8; a search of at
  most 1,000 hits; a page file read up to 3 MB, as a live fetch): a line past one is one error
  naming index.jsonl and the line.
* `brave` (`LiveWeb` over `BraveSearch`): the Brave Search API's web search (GET
  /res/v1/web/search, key in the X-Subscription-Token header, from $BRAVE_SEARCH_API_KEY), and
  pages fetched over HTTP with a timeout and a size cap. Only used when a user asks for it.

Every call and what it returned (hits; the page's URL, status and the text shown) is a
ToolCallStep of the episode, so each URL a deliverable cites can be traced to a fetch.

Either backend is held to the deny-list of the benchmarks' own sources (web_deny.py; on unless
--allow-peeking): a denied fetch is refused with a tool error, denied hits are removed, and the
step records the attempt under `peeking`.

The backends' protocol is web_backend.py, page text web_page_text.py, the backends
web_recorded.py and web_live.py; this module chooses one (--web) and holds the tools.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from deskbench.agents.base import Recorder, describe_problem
from deskbench.errors import UserError
from deskbench.models.types import ToolCall, ToolSpec
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.deliverables.web_backend import WebBackend, WebError
from deskbench.tracks.deliverables.web_deny import (
    DenyList,
    GuardedWeb,
    Screened,
    WebBlocked,
    guarded,
    peeking_key,
)
from deskbench.tracks.deliverables.web_live import SEARCH_APIS, SEARCH_KEYS, LiveWeb
from deskbench.tracks.deliverables.web_recorded import RecordedWeb, RecordingWeb, read_recording

PAGE_CHARS = 20_000  # page text shown to the model per fetch (the rest is cut, and said to be)
MAX_RESULTS = 10  # hits per web_search call


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


def open_web(choice: WebChoice, deny: DenyList | None = None) -> WebBackend:
    """The backend `choice` names, held to `deny` (None: --allow-peeking). A recording saves what
    the agent was shown, so the deny-list sits outside it."""
    if not choice.live:
        return guarded(RecordedWeb(Path(choice.arg)), deny)
    backend: WebBackend = LiveWeb(SEARCH_APIS[choice.kind](os.environ.get(SEARCH_KEYS[choice.kind], "")))
    return guarded(RecordingWeb(backend, choice.record_to) if choice.record_to else backend, deny)


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
            if isinstance(self.backend, GuardedWeb):
                screened = await self.backend.screened_search(query, count)
            else:
                screened = Screened(await self.backend.search(query, count), [], None)
        except (ValueError, WebError) as exc:
            problem = describe_problem(exc)
            rec.add(ToolCallStep(name=self.spec.name, arguments={"raw": call.arguments[:2000]},
                                 result={"backend": self.backend.name, "error": problem}))
            return f"error: {problem}"
        hits, peeking = screened.hits, screened.record()
        rec.add(ToolCallStep(name=self.spec.name, arguments={"query": query, "count": count},
                             result={"backend": self.backend.name, "results": [h.model_dump() for h in hits],
                                     **({peeking_key(): peeking} if peeking else {})},
                             seconds=round(time.monotonic() - started, 4)))
        removed = (f"\n({len(screened.removed)} result(s) from the benchmark's own sources removed: "
                   "they are blocked in this run)" if screened.removed else "")
        if not hits:
            return f"no results for {query!r}{removed}"
        return "\n\n".join(f"[{i}] {h.title}\n{h.url}\n{h.snippet}".rstrip() for i, h in enumerate(hits, 1)) + removed


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
            blocked = {peeking_key(): {"action": "blocked", "url": exc.url, "rule": exc.reason}} \
                if isinstance(exc, WebBlocked) else {}
            rec.add(ToolCallStep(name=self.spec.name, arguments=args,
                                 result={"backend": self.backend.name, "error": problem, **blocked}))
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
