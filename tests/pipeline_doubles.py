"""Doubles for the Table 3 pipeline agents' tests (tests/tracks/docqa/test_mdocagent.py,
test_m3docrag.py): a model provider plugin (`--model pipeline_doubles:pipeline/NAME`) that answers
each MDocAgent role as the role's prompt asks, from what it was shown, and keeps every request it
got (REQUESTS) so a test reads the messages as sent; and a retriever kind that returns nothing.

The model reads only text: an answering agent replies "Mountain car" when a text it was shown
holds it, else how many page images it was shown; the Critical agent replies its two clues
inside prose; the Summarising agent replies {"Answer": ...} with the first answer in its input
that is not a count of images (or a reply scripted in SUMMARY)."""

from __future__ import annotations

import json

from deskbench.models.registry import ModelSpec
from deskbench.models.types import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    TextPart,
    Usage,
)
from deskbench.search.index import ScoredPage
from deskbench.search.retriever import PageSource, Retriever
from deskbench.tracks.docqa.agents.mdocagent.prompts import CRITICAL_PROMPT, SUM_SYSTEM

REQUESTS: list[ChatRequest] = []
CRITICAL_REPLY = 'Here you go: {"text": "winter rental rates", "image": "the rates table"} as asked.'
SUMMARY: list[str] = []  # when set, the Summarising agent's next replies, in order


def _texts(message: Message) -> list[str]:
    if isinstance(message.content, str):
        return [message.content]
    return [p.text for p in message.content if isinstance(p, TextPart)]


def _images(message: Message) -> int:
    return 0 if isinstance(message.content, str) else sum(isinstance(p, ImagePart) for p in message.content)


class PipelineModel:
    def __init__(self, spec: ModelSpec) -> None:
        self.id = spec.id

    async def complete(self, request: ChatRequest) -> ChatResponse:
        REQUESTS.append(request)
        last = request.messages[-1]
        asked = "".join(_texts(last))
        if asked == CRITICAL_PROMPT:
            reply = CRITICAL_REPLY
        elif asked.startswith(SUM_SYSTEM):
            if SUMMARY:
                reply = SUMMARY.pop(0)
            else:
                answers = [line for line in asked.removeprefix(SUM_SYSTEM).splitlines()
                           if line and not line.endswith(" Agent:") and "page images" not in line]
                reply = json.dumps({"Answer": answers[0] if answers else "nothing"})
        else:
            shown = [t for m in request.messages for t in _texts(m)]
            images = sum(_images(m) for m in request.messages)
            reply = "Mountain car" if any("Mountain car" in t for t in shown) else f"{images} page images"
        return ChatResponse(message=Message(role="assistant", content=reply), model=self.id,
                            usage=Usage(calls=1, input_tokens=10, output_tokens=5), finish_reason="stop")

    async def aclose(self) -> None:
        return None


def pipeline(spec: ModelSpec, timeout: float) -> ChatModel:
    return PipelineModel(spec)


class _Nothing:
    def search(self, query: str, k: int) -> list[ScoredPage]:
        return []

    def identity(self) -> dict[str, object]:
        return {"kind": "nothing"}


class NothingKind:
    name = "nothing"
    needs_model = False
    summary = "returns no page for any query (a test double)"

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        return _Nothing()


NOTHING = NothingKind()


class TorchlessKind:
    """A kind whose model library is not installed, as an embedding kind is without torch."""

    name = "torchless"
    needs_model = False
    summary = "raises ImportError when opened (a test double)"

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        raise ImportError("No module named 'torch'")


TORCHLESS = TorchlessKind()
