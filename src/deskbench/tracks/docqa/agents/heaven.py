"""The HEAVEN baseline's answering step (`--agent heaven`, with `--retriever heaven=DSE,COLQWEN`):
one HEAVEN retrieval of the question, its k2 pages shown to the model once.

As MADQA's baselines/heaven/heaven.py (commit 978fa76) HEAVENAgent.answer_question runs it:

- the question as written is the query (retrieve_with_scores(query=question, k=stage2_k));
- one user message: the prompt below (the paper's Prompt 7 is this text, typeset), then each page
  as a JPEG data URL with detail "high";
- the page images are the index's: PyMuPDF renders at 144 dpi (100 over 20 MB, 72 over 50 MB of
  PDF), at most 4,000,000 pixels, saved as JPEG quality 85 and sent re-encoded as JPEG quality 85
  (deskbench renders with pdfium: the pixels can differ slightly);
- max_tokens 1024 (sent as max_completion_tokens to the models that need it), nothing else;
- the reply: the first-to-last {...} span holding "answer" then "citations", parsed as JSON and
  used when it has both keys; otherwise the whole reply (stripped) is the one answer, no citations.
  No repair turn. Citations are taken as given (pages 1-based, as the prompt asks).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from typing import TYPE_CHECKING, Any

from deskbench.agents.base import AgentContext, AgentResult, AnswerArgs, Recorder, recorded
from deskbench.corpus.images import ImageSpec
from deskbench.models.types import ChatRequest, ImagePart, Message, Part, TextPart
from deskbench.tasks.trajectory import Citation, ToolCallStep
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.tasks import DocQATask

if TYPE_CHECKING:
    from deskbench.corpus import Corpus

PROMPT = """You are a document QA assistant. Answer the question based ONLY on the provided document images.

Document sources:
{context}

Question: {question}

Instructions:
1. Carefully examine ALL provided document images
2. Find the specific information that answers the question
3. Respond with a JSON object in this exact format:
{{
  "answer": ["answer value 1", "answer value 2", ...],
  "citations": [
    {{"file": "exact_filename.pdf", "page": 1}},
    {{"file": "another_file.pdf", "page": 3}}
  ]
}}

Where:
- answer: list of answer values (use as few words as possible, exact document wording preferred)
- citations: list of sources with exact PDF filename and page number (1-indexed)

IMPORTANT: The answer to the question is definitely in the documents. Examine all provided pages carefully.
"""
"""heaven.py _call_vlm's text, character for character ({context}: one "Image i: FILE, Page N" line a page)."""

MAX_TOKENS = 1024
JPEG_QUALITY = 85
MAX_PIXELS = 4_000_000
_ANSWER_SPAN = re.compile(r'\{[\s\S]*"answer"[\s\S]*"citations"[\s\S]*\}')
NO_IMAGES = "No document images available"


def identity() -> dict[str, object]:
    """What the agent sends besides the prompt, for the run's configuration (the page settings the
    other agents take from --dpi / --view do not apply: these are the official request's)."""
    return {"request": "MADQA baselines/heaven/heaven.py HEAVENAgent._call_vlm (commit 978fa76)",
            "pages": {"count": "the retriever's k2", "format": "jpeg", "quality": JPEG_QUALITY, "encoded": 2,
                      "dpi": 144, "dpi_over_20mb": 100, "dpi_over_50mb": 72, "max_pixels": MAX_PIXELS,
                      "detail": "high"},
            "max_tokens": MAX_TOKENS, "reply": "the answer/citations JSON span, else the whole reply; no repair turn"}


def render_dpi(pdf_bytes: int) -> int:
    """index.py pdf_to_images: 144 dpi, lowered for large files."""
    mb = pdf_bytes / (1024 * 1024)
    return 72 if mb > 50 else 100 if mb > 20 else 144


def page_jpeg(corpus: Corpus, doc: str, page: int) -> bytes:
    """A page as the official agent sends it: rendered, stored as JPEG 85, re-encoded as JPEG 85."""
    from PIL import Image

    dpi = render_dpi(corpus.pdf_path(doc).stat().st_size)
    image = Image.open(io.BytesIO(corpus.page_image(doc, page, ImageSpec(dpi=dpi, format="png",
                                                                          max_pixels=MAX_PIXELS)))).convert("RGB")
    data = b""
    for _ in range(2):  # DocumentIndex.save, then _image_to_base64
        buf = io.BytesIO()
        image.save(buf, format="JPEG", quality=JPEG_QUALITY)
        data = buf.getvalue()
        image = Image.open(io.BytesIO(data))
    return data


def parse_reply(text: str) -> tuple[list[Any], list[Any]]:
    """_parse_answer: the answer and citations as the model wrote them, else the reply as the answer."""
    match = _ANSWER_SPAN.search(text)
    if match:
        try:
            parsed = json.loads(match.group(0))
            if isinstance(parsed, dict) and "answer" in parsed and "citations" in parsed:
                return _as_list(parsed["answer"]), _as_list(parsed["citations"])
        except json.JSONDecodeError:
            pass
    return [text.strip()], []


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def answer_args(answer: list[Any], citations: list[Any]) -> AnswerArgs:
    """The parsed reply as deskbench's answer: items as text (an empty answer stays one empty
    string, scored wrong), citations that name a file (and page) kept, others dropped."""
    kept: list[Citation] = []
    for c in citations:
        try:
            kept.append(Citation.model_validate(c))
        except ValueError:
            continue
    items = ["" if a is None else a if isinstance(a, str) else json.dumps(a) for a in answer] or [""]
    return AnswerArgs(answer=items, citations=kept)


class HeavenAgent:
    name = "heaven"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        from deskbench.search.embedded.heaven import HeavenRetriever

        corpus = ctx.corpus
        assert corpus is not None, "heaven needs a corpus"
        retriever = corpus.retriever
        if not isinstance(retriever, HeavenRetriever):
            return rec.result("error", error="--agent heaven retrieves with HEAVEN: run it with --retriever "
                              "heaven=DSE_MODEL,COLQWEN_MODEL (docs/retrievers.md)")
        k2 = retriever.options.k2
        hits = await asyncio.to_thread(retriever.search, task.question, k2)
        pages = [(h.document, h.page) for h in hits]
        rec.add(ToolCallStep(name="search_documents", arguments={"query": task.question},
                             result={"pages": [list(p) for p in pages]}),
                detail={"retriever": "heaven", "k2": k2,
                        "hits": [{"file": h.document, "page": h.page, "score": h.score} for h in hits]})
        if not pages:
            return rec.result("ok", submission_of(task, AnswerArgs(answer=[NO_IMAGES]), steps=1))
        images = await asyncio.to_thread(lambda: [page_jpeg(corpus, d, p) for d, p in pages])
        context = "\n".join(f"Image {i + 1}: {doc}, Page {page}" for i, (doc, page) in enumerate(pages))
        content: list[Part] = [TextPart(text=PROMPT.format(context=context, question=task.question))]
        for (doc, page), data in zip(pages, images, strict=True):
            part = ImagePart.of(data, "image/jpeg", ref=f"page:{doc}#{page}@heaven")
            content.append(part.model_copy(update={"detail": "high"}))
        response = await rec.complete(ChatRequest(messages=[Message(role="user", content=content)],
                                                  max_tokens=MAX_TOKENS))
        answer, citations = parse_reply(response.message.text() or "")
        return rec.result("ok", submission_of(task, answer_args(answer, citations), steps=1))
