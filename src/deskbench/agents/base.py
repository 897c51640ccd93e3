"""What the agents share: an episode's result (its submission is the track's submission type: the
core names no track), the Recorder every model call goes through, the docqa agents' context,
answer schema and parser, and how retrieved pages are shown to a model (as images, or as text with
--view text). docqa's agent protocol and its submission from an answer are the track's
(tracks/docqa/agents/protocol.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from pydantic import BaseModel, Field, ValidationError

from deskbench.corpus import Corpus
from deskbench.corpus.images import ImageSpec
from deskbench.models.meter import METER, LimitReached
from deskbench.models.types import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    ModelError,
    Part,
    TextPart,
    Usage,
)
from deskbench.runs.store import now
from deskbench.runs.transcript import Transcript
from deskbench.tasks.trajectory import Citation, ModelCallStep, Step, ToolCallStep, TrajectoryStep
from deskbench.untrusted.limits import FileLimitError

if TYPE_CHECKING:  # only the rlm agent runs code: the others never import the sandbox
    from deskbench.sandbox import Sandbox

View = Literal["image", "text"]
VIEWS: tuple[View, ...] = get_args(View)
EpisodeStatus = Literal["ok", "error", "limit"]
S = TypeVar("S", bound=Step)


@dataclass(frozen=True)
class AgentSettings:
    """A run's agent settings. Defaults are the official MADQA baselines' (github OxRML/MADQA):
    page images at 200 DPI (baselines/bm25-mllm-agent/utils.py get_pdf_page_as_png(dpi=200),
    which every provider's agent calls without a dpi), no output-token cap unless the provider
    requires one (models/settings.py). max_steps None is the agent's own: bm25-agent T=10 (the
    paper's G.1), rlm 30 root iterations (the RLM library's RLM(max_iterations=30), which the
    official RLM baseline does not change). Built directly, bm25-agent runs the paper's preset
    (Prompt 5 loop, T=10, k=5); `deskbench run` resolves protocol, max_steps and top_k from its
    presets (default: the official process_dataset.py's, bm25_protocols/registry.py)."""

    max_steps: int | None = None  # T in Algorithm 1; None: the agent's default
    top_k: int = 5
    view: View = "image"
    dpi: int = 200
    max_sub_calls: int | None = None  # rlm: llm_query calls per episode; None: no cap, as the official RLM
    max_image_bytes: int = 5_000_000  # pages above it are downscaled (Lanczos); adapters fit each model's limits
    # bm25-agent: the loop it runs (tracks/docqa/agents/bm25_protocols/registry.py): "paper" (Prompt 5)
    # or an official script's ("openai_agent.py", ...); `deskbench run` resolves it from --protocol/--preset
    protocol: str = "paper"


@dataclass
class AgentContext:
    model: ChatModel | None  # None for the baselines that call no model (lexical)
    corpus: Corpus | None
    settings: AgentSettings = field(default_factory=AgentSettings)
    sandbox: Sandbox | None = None  # for agents that run model-written code (rlm)


@dataclass
class AgentResult:
    status: EpisodeStatus
    submission: BaseModel | None = None  # of the run's track's submission type (Track.submission_type)
    error: str | None = None
    trajectory: list[TrajectoryStep] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    transcript: Transcript | None = None  # every call's full text (runs/transcript.py)


class AnswerArgs(BaseModel):
    """The final answer, as the provide_answer tool and the JSON replies give it."""

    answer: list[str] = Field(min_length=1)
    citations: list[Citation] = Field(default_factory=list)


ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "citations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"file": {"type": "string"}, "page": {"type": "integer"}},
                "required": ["file", "page"],
            },
        },
    },
    "required": ["answer", "citations"],
}


class UnparseableAnswer(ValueError):
    """The model's answer could not be read, even after the repair turn."""


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_answer(payload: str | dict[str, Any]) -> AnswerArgs:
    """An answer from tool arguments or from a reply's text (the first {...} block in it)."""
    if isinstance(payload, str):
        match = _JSON_OBJECT.search(payload)
        if match is None:
            raise ValueError("no JSON object in the reply")
        payload = json.loads(match.group())
    return AnswerArgs.model_validate(payload)


def describe_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        return f"{'.'.join(str(p) for p in err['loc']) or 'answer'}: {err['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class Recorder:
    """Calls the model, and keeps the trajectory and usage of the episode as it goes."""

    def __init__(self, model: ChatModel | None) -> None:
        self.model = model  # None: a context without a model (a plugin agent's record of no calls)
        self.trajectory: list[TrajectoryStep] = []
        self.usage = Usage()
        self.transcript = Transcript()
        self._digest = ConversationDigest()
        meter = METER.get()
        if meter is not None:  # the runner's: an episode ended at its limit keeps what this holds
            meter.attach(self)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if self.model is None:
            raise RuntimeError("this episode's context has no model to call")
        started = time.monotonic()
        at = self.transcript.elapsed()
        try:
            response = await self.model.complete(request)
        except ModelError as exc:
            self.transcript.model_call(self.model.id, request, None, at=at, seconds=time.monotonic() - started,
                                       error=str(exc))
            raise
        except LimitReached as exc:  # the episode's limit: the reply that reached it was paid for, keep it
            if exc.response is not None:
                self._keep(request, exc.response, at, started)
            raise
        self._keep(request, response, at, started)
        return response

    def _keep(self, request: ChatRequest, response: ChatResponse, at: float, started: float) -> None:
        assert self.model is not None
        self.transcript.model_call(self.model.id, request, response, at=at, seconds=time.monotonic() - started)
        self.usage = self.usage + response.usage
        self.add(ModelCallStep(
            messages_hash=self._digest.of(request.messages)[:16],
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            seconds=round(time.monotonic() - started, 4),
            cost_usd=response.usage.cost_usd,
        ))

    def add(self, step: TrajectoryStep, detail: dict[str, Any] | None = None) -> None:
        """Append a step that has just ended, stamped with the time (every step goes in here). A
        tool call also goes to the transcript, with `detail`: what the step's summary leaves out
        (a search's hits with their scores, a program's whole output)."""
        self.trajectory.append(stamped(step))
        if isinstance(step, ToolCallStep):
            self.transcript.tool(step.name, step.arguments, {**step.result, **(detail or {})})

    def result(self, status: EpisodeStatus,
               submission: BaseModel | None = None,
               error: str | None = None) -> AgentResult:
        return AgentResult(status=status, submission=submission, error=error,
                           trajectory=self.trajectory, usage=self.usage, transcript=self.transcript)


def stamped(step: S) -> S:
    """The step with `at` set to now, the time it ended, unless it already says when."""
    if step.at is None:
        step.at = now()
        step.mark_ended()
    return step


class ConversationDigest:
    """sha256 of a conversation that grows by appending, hashing only the new messages.

    Hashing the whole request at every step (as the cache key does) costs O(history) per step,
    over a millisecond on long conversations; a conversation that is not an extension of the
    last one is hashed from the start.
    """

    def __init__(self) -> None:
        self._seen: list[Message] = []
        self._hash = hashlib.sha256()

    def of(self, messages: Sequence[Message]) -> str:
        n = len(self._seen)
        if len(messages) < n or any(a is not b for a, b in zip(self._seen, messages, strict=False)):
            self._seen, self._hash, n = [], hashlib.sha256(), 0
        for m in messages[n:]:
            self._hash.update(m.model_dump_json().encode())
            self._hash.update(b"\n")
        self._seen = list(messages)
        return self._hash.hexdigest()


def load_page_parts(ctx: AgentContext, pages: Sequence[tuple[str, int]]) -> list[Part]:
    """The pages as the model sees them: a label, then the image (or the page text). Blocking:
    call it in a worker thread, once for all the pages of a step."""
    assert ctx.corpus is not None
    corpus, settings = ctx.corpus, ctx.settings
    spec = ImageSpec(dpi=settings.dpi, format="png", max_bytes=settings.max_image_bytes)
    texts = corpus.page_texts(pages) if settings.view == "text" else []
    parts: list[Part] = []
    for i, (doc, page) in enumerate(pages):
        parts.append(TextPart(text=f"file: {doc} page: {page}"))
        if settings.view == "text":
            parts.append(TextPart(text=texts[i], ref=f"pagetext:{doc}#{page}"))
        else:
            try:
                image = corpus.page_image(doc, page, spec)
            except FileLimitError as exc:  # a hostile page: the model is told, the episode goes on
                parts.append(TextPart(text=f"[page image not shown: {exc}]"))
                continue
            parts.append(ImagePart.of(image, "image/png", ref=f"page:{doc}#{page}@{settings.dpi}"))
    return parts


async def page_parts(ctx: AgentContext, pages: Sequence[tuple[str, int]]) -> list[Part]:
    return await asyncio.to_thread(load_page_parts, ctx, pages)


async def answer_once(
    rec: Recorder, messages: list[Message], *, repairs: int = 1
) -> tuple[AnswerArgs | None, str]:
    """One answer call with structured output; a reply that does not parse gets `repairs` more
    tries with the problem named. Returns the answer, or None and the last problem."""
    problem = ""
    for _ in range(1 + repairs):
        response = await rec.complete(ChatRequest(messages=messages, response_schema=ANSWER_SCHEMA))
        try:
            return parse_answer(response.message.text()), ""
        except (ValueError, ValidationError) as exc:
            problem = describe_problem(exc)
            messages = [*messages, response.message, Message(
                role="user",
                content=f"Your reply could not be read ({problem}). Reply with only the JSON object "
                '{"answer": [...], "citations": [{"file": ..., "page": ...}]}.',
            )]
    return None, problem


EpisodeBody = Callable[[Recorder], Awaitable[AgentResult]]


async def recorded(ctx: AgentContext, body: EpisodeBody) -> AgentResult:
    """Run an episode body with a fresh Recorder; a model call that fails for good ends the
    episode as an error that keeps the trajectory and usage gathered so far."""
    assert ctx.model is not None, "this agent calls a model"
    rec = Recorder(ctx.model)
    try:
        return await body(rec)
    except ModelError as exc:
        return rec.result("error", error=f"model call failed: {exc}")
