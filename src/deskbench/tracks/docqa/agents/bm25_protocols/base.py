"""What every BM25-agent protocol shares: the protocol's shape, and the page search it runs.

A protocol is one way of driving the search-then-answer loop: the paper's Prompt 5 loop
(paper.py) or one of the official scripts (github OxRML/MADQA baselines/bm25-mllm-agent/
<provider>_agent.py), each reproduced request for request. They differ in prompts, tools, the
answer channel and how pages are put in front of the model; they share the search (`PageSearch`)
and what is recorded of it.

Searches that show page text run on the event loop while they are cheap. On a small corpus a
search and its page texts cost 0.05-0.3 ms of CPU, less than the hop to a worker thread; in a
worker, each time numpy or SQLite lets the GIL go, the search waits for the busy event loop to
hand it back (up to the 5 ms switch interval): with 64 episodes in flight (bench_runtime), worker
searches of 0.1-0.3 ms CPU took 2-4 ms on average and up to 40 ms (measured with the earlier
tantivy index). A corpus whose searches cost more gets them in a worker thread, where numpy's
array work runs without the GIL; pages shown as images always load there (a page may need rendering).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from PIL import Image

from deskbench.agents.base import AgentContext, AgentResult, Recorder, load_page_parts
from deskbench.corpus.corpus import SearchHit
from deskbench.corpus.images import ImageSpec
from deskbench.errors import QuerySyntaxError
from deskbench.models.types import ImagePart, Part, TextPart
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.bm25_protocols.script_texts import PAGE_LABEL
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask
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


def official_png(image: Image.Image) -> bytes:
    """The PNG bytes the scripts' utils.image_to_base64 encodes: Pillow's PNG writer with its defaults."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


SHRINK = 0.9
"""Each step of the scripts' size loop scales the original page by another 0.9 (0.9, 0.81, ...)."""


def shrink(page: Image.Image, max_base64: int) -> tuple[int, bytes]:
    """The size loop of anthropic_agent.py and vllm_agent.py (each with its own limit) on `page`
    (an RGB image): how many 0.9 steps it takes and the PNG it sends. Each step redraws the
    ORIGINAL at the running product of the factors (int() of each side), Lanczos, until the
    base64 text is within the limit."""
    data = official_png(page)
    steps, factor = 0, 1.0
    while len(base64.b64encode(data)) > max_base64:
        steps += 1
        factor *= SHRINK
        data = official_png(page.resize((int(page.width * factor), int(page.height * factor)),
                                        Image.Resampling.LANCZOS))
    return steps, data


def script_view(ctx: AgentContext, doc: str, page: int, image: Callable[[AgentContext, str, int], ImagePart]) -> Part:
    """One page as a script's loader shows it: its `image`, or with --view text the page's text
    (deskbench's addition: the scripts show images only)."""
    return page_view(ctx, doc, page) if ctx.settings.view == "text" else image(ctx, doc, page)


V = TypeVar("V")


class PageMemory(Generic[V]):
    """What a script's page image costs to make (a PNG or WebP encode, 0.1-1 s of CPU a page),
    remembered per rendered page (the 200 DPI PNG's hash) for the process's life: bounded,
    thread-safe, shared by the episodes (each gets a new protocol object)."""

    def __init__(self, max_pages: int) -> None:
        self._memory: OrderedDict[bytes, V] = OrderedDict()
        self._max = max_pages
        self._lock = threading.Lock()

    @staticmethod
    def rendered(ctx: AgentContext, doc: str, page: int) -> tuple[bytes, bytes]:
        """The page rendered at ctx.settings.dpi as a PNG (no size limit), and its memory key."""
        assert ctx.corpus is not None
        rendered = ctx.corpus.page_image(doc, page, ImageSpec(dpi=ctx.settings.dpi, format="png", max_bytes=None))
        return rendered, hashlib.sha256(rendered).digest()

    def recall(self, key: bytes) -> V | None:
        with self._lock:
            value = self._memory.get(key)
            if value is not None:
                self._memory.move_to_end(key)
            return value

    def remember(self, key: bytes, value: V) -> None:
        with self._lock:
            self._memory[key] = value
            if len(self._memory) > self._max:
                self._memory.popitem(last=False)


class ShrunkPages(PageMemory[bool]):
    """The page images of anthropic_agent.py and vllm_agent.py: the 200 DPI PNG, shrunk by their
    size loop while its base64 text exceeds the script's limit, with vllm_agent.py's detail
    "high". The verdict "no step needed" (the rendered PNG then goes as it is: the same pixels)
    is what is remembered."""

    def __init__(self, max_base64: int, *, detail: str | None = None, header: str | None = None,
                 max_pages: int = 8192) -> None:
        super().__init__(max_pages)
        self.max_base64 = max_base64
        self.detail = detail
        self.header = header

    def image(self, ctx: AgentContext, doc: str, page: int) -> ImagePart:
        """One page's image part (blocking: it may render and encode)."""
        rendered, key = self.rendered(ctx, doc, page)
        data = rendered
        if not (self.recall(key) and len(base64.b64encode(rendered)) <= self.max_base64):
            with Image.open(io.BytesIO(rendered)) as opened:
                original = opened.convert("RGB")  # pdf2image's pages are RGB
            steps, data = shrink(original, self.max_base64)
            self.remember(key, steps == 0)
        return ImagePart.of(data, "image/png", ref=f"page:{doc}#{page}@{ctx.settings.dpi}").model_copy(
            update={"detail": self.detail} if self.detail is not None else {})

    def load(self, ctx: AgentContext, pages: Pages) -> list[Part]:
        """The scripts' page blocks: the header (when the script has one), then per page
        "\\nFile: X, Page: N" and the page; a page that cannot be shown keeps its label, as the
        scripts leave out the image of a page they cannot load."""
        parts: list[Part] = [TextPart(text=self.header)] if self.header is not None else []
        for doc, page in pages:
            parts.append(TextPart(text=PAGE_LABEL.format(file=doc, page=page)))
            try:
                parts.append(script_view(ctx, doc, page, self.image))
            except FileLimitError:
                continue
        return parts


def script_submission(task: DocQATask, answer: Any, citations: Any, iteration: int,
                      history: list[dict[str, Any]], error: str | None) -> DocQASubmission:
    """The row anthropic_agent.py and vllm_agent.py return, as a submission; citations that are
    not a list are left out, those that cannot be read as pages are dropped (and named in the
    error), not the whole answer."""
    dropped: list[str] = []
    submission = DocQASubmission.model_validate(
        {"id": task.id, "question": task.question, "answer": answer,
         "citations": citations if isinstance(citations, list) else [], "iterations": iteration,
         "steps": len(history), "search_history": history, "error": error},
        context={"dropped": dropped})
    if dropped:
        note = f"citations dropped: {'; '.join(dropped)}"
        submission.error = f"{error}; {note}" if error else note
    return submission


class Bm25Protocol(Protocol):
    """One way of running the BM25 agent's loop. `name` is the registry key (`--protocol`),
    `source` what it reproduces (recorded with the run)."""

    name: str
    source: str

    async def run(self, task: DocQATask, ctx: AgentContext, rec: Recorder, pages: PageSearch,
                  max_steps: int) -> AgentResult: ...
