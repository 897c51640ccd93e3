"""What every BM25-agent protocol shares: the protocol's shape, and the page search it runs.

A protocol is one way of driving the search-then-answer loop: the paper's Prompt 5 loop
(paper.py) or one of the official scripts (github OxRML/MADQA baselines/bm25-mllm-agent/
<provider>_agent.py), each reproduced request for request. They differ in prompts, tools, the
answer channel and how pages are put in front of the model; they share the search (`PageSearch`)
and what is recorded of it.

Searches that show page text run on the event loop while they are cheap. On a small corpus a
search and its page texts cost 0.05-0.3 ms of CPU, less than the hop to a worker thread; in a
worker, each time tantivy or SQLite lets the GIL go, the search waits for the busy event loop to
hand it back (up to the 5 ms switch interval): with 64 episodes in flight (bench_runtime), worker
searches of 0.1-0.3 ms CPU took 2-4 ms on average and up to 40 ms. A corpus whose searches cost
more (a phrase query over 18,000 pages: ~2 ms) gets them in a worker thread, where tantivy runs
the query without the GIL; pages shown as images always load there (a page may need rendering).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from deskbench.agents.base import AgentContext, AgentResult, Recorder, load_page_parts
from deskbench.corpus.corpus import SearchHit
from deskbench.corpus.images import ImageSpec
from deskbench.errors import QuerySyntaxError
from deskbench.models.types import ImagePart, Part, TextPart
from deskbench.tasks.docqa import DocQATask
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.untrusted.limits import FileLimitError

OFFICIAL_COMMIT = "978fa76de16acf983363557823f4f2d1ed74ba47"
"""The commit of github OxRML/MADQA whose baselines the official protocols reproduce."""
OFFICIAL_REPO = f"OxRML/MADQA@{OFFICIAL_COMMIT}"
OFFICIAL_DIR = "baselines/bm25-mllm-agent"


def official_source(script: str) -> str:
    """How a protocol names the official script it reproduces."""
    return f"{OFFICIAL_REPO} {OFFICIAL_DIR}/{script}"


INLINE_SEARCH_SECONDS = 0.001
"""Text-view searches run on the event loop while they cost less CPU than this (moving average)."""

Pages = Sequence[tuple[str, int]]
PageLoader = Callable[[AgentContext, Pages], list[Part]]
"""How a protocol shows the pages of one search to the model (blocking: it may render)."""


@dataclass
class Found:
    """One search's outcome: the hits (with scores), the pages as the protocol's loader showed
    them, and the refusal of a query the search would not parse (only a strict search refuses)."""

    query: str
    hits: list[SearchHit] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    error: str | None = None

    @property
    def pages(self) -> list[tuple[str, int]]:
        return [(h.document, h.page) for h in self.hits]


class PageSearch:
    """Runs the searches of one agent (inline or in a worker thread, see the module docstring)
    and records each as a ToolCallStep whose detail keeps the scores."""

    def __init__(self) -> None:
        self.search_cpu = 0.0  # CPU seconds a search costs, a moving average over this agent's searches

    async def search(self, ctx: AgentContext, rec: Recorder, query: str, load: PageLoader = load_page_parts,
                     *, tool: str = "search_documents") -> Found:
        """Search for `query` (top ctx.settings.top_k pages), load what the model is shown of the
        pages with `load`, and record the step under the tool's name."""
        if ctx.settings.view == "text" and self.search_cpu < INLINE_SEARCH_SECONDS:
            found = self._timed_search(ctx, query, load)
        else:
            found = await asyncio.to_thread(self._timed_search, ctx, query, load)
        rec.add(ToolCallStep(name=tool, arguments={"query": query}, result={"pages": [list(p) for p in found.pages]}),
                detail={"hits": [{"file": h.document, "page": h.page, "score": h.score} for h in found.hits]})
        return found

    def _timed_search(self, ctx: AgentContext, query: str, load: PageLoader) -> Found:
        started = time.thread_time()
        try:
            return self._search(ctx, query, load)
        finally:  # from any thread: a lost update of the average does no harm
            self.search_cpu += (time.thread_time() - started - self.search_cpu) / 4

    @staticmethod
    def _search(ctx: AgentContext, query: str, load: PageLoader) -> Found:
        """One search and its pages; blocking."""
        assert ctx.corpus is not None, "bm25-agent needs a corpus"
        try:  # parsed as MADQA's Whoosh tool parses it: a malformed query is repaired, not refused
            hits = ctx.corpus.search(query, ctx.settings.top_k, snippets=False)
        except QuerySyntaxError as exc:  # only a strict search raises; kept so a message would reach the agent
            return Found(query, error=str(exc))
        if not hits:
            return Found(query)
        return Found(query, hits, load(ctx, [(h.document, h.page) for h in hits]))


def page_view(ctx: AgentContext, doc: str, page: int, *, detail: str | None = None) -> Part:
    """One page as the official scripts show it: a 200 DPI PNG (ctx.settings.dpi), with the
    OpenAI `detail` when given; with --view text, the page's text instead (deskbench's
    addition: the scripts show images only). FileLimitError: a page that cannot be shown
    (the scripts print a warning and send the label without the image)."""
    assert ctx.corpus is not None
    settings = ctx.settings
    if settings.view == "text":
        return TextPart(text=ctx.corpus.page_texts([(doc, page)])[0], ref=f"pagetext:{doc}#{page}")
    spec = ImageSpec(dpi=settings.dpi, format="png", max_bytes=settings.max_image_bytes)
    image = ctx.corpus.page_image(doc, page, spec)
    return ImagePart.of(image, "image/png", ref=f"page:{doc}#{page}@{settings.dpi}").model_copy(
        update={"detail": detail} if detail is not None else {})


def labelled_pages(label: Callable[[str, int], str], *, detail: str | None = None) -> PageLoader:
    """A loader that shows each page as a text label then the page (an official script's
    interleaving); a page that cannot be shown keeps its label, as the scripts do."""

    def load(ctx: AgentContext, pages: Pages) -> list[Part]:
        parts: list[Part] = []
        for doc, page in pages:
            parts.append(TextPart(text=label(doc, page)))
            try:
                parts.append(page_view(ctx, doc, page, detail=detail))
            except FileLimitError:
                continue
        return parts

    return load


class Bm25Protocol(Protocol):
    """One way of running the BM25 agent's loop. `name` is the registry key (`--protocol`),
    `source` what it reproduces (recorded with the run)."""

    name: str
    source: str

    async def run(self, task: DocQATask, ctx: AgentContext, rec: Recorder, pages: PageSearch,
                  max_steps: int) -> AgentResult: ...
