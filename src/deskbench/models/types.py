"""What goes to a chat model and what comes back, independent of any provider's SDK.

Requests are pydantic models so that they can be hashed for the response cache and written
into trajectories; adapters translate them into each provider's wire format.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Field

from deskbench.errors import UserError


class TextPart(BaseModel):
    type: Literal["text"] = "text"
    text: str
    # where the text came from, for the transcript (a corpus page's text as the text view shows it:
    # "pagetext:<doc>#<page>", stored by reference); not sent, not part of the cache key
    ref: str | None = Field(default=None, exclude=True)


class ImagePart(BaseModel):
    type: Literal["image"] = "image"
    mime: str = "image/png"
    data_b64: str
    # where the image came from, for the transcript (a corpus page: "page:<doc>#<page>@<dpi>");
    # not sent, not part of the cache key
    ref: str | None = Field(default=None, exclude=True)
    # OpenAI's image_url "detail" ("high" in the official MADQA openai/vllm scripts); left out of a
    # dump when None, so a request without it keeps the cache key it had before this field existed
    detail: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @classmethod
    def of(cls, data: bytes, mime: str = "image/png", ref: str | None = None) -> ImagePart:
        return cls(mime=mime, data_b64=base64.b64encode(data).decode("ascii"), ref=ref)

    @property
    def data(self) -> bytes:
        return base64.b64decode(self.data_b64)


Part = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced: parsing it may fail, and that is data
    # the provider's opaque token for this call, sent back with it (Gemini's thoughtSignature on a
    # functionCall part: the native API wants it back in the function-calling loop); left out of
    # a dump when None, so a call without one keeps the cache key it had before this field existed
    signature: str | None = Field(default=None, exclude_if=lambda v: v is None)

    def parsed(self) -> dict[str, Any]:
        """The arguments as an object; ValueError (with the reason) when they are not."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError(f"tool arguments must be a JSON object, got {type(value).__name__}")
        return value


class Reasoning(BaseModel):
    """Reasoning ("thinking") a provider returned beside an assistant reply, kept for the transcript.

    Never sent as ordinary text. Anthropic signs its thinking blocks and requires them back
    unchanged in a tool-use loop, so `signature` (a thinking block's) and `redacted` (a
    redacted_thinking block's encrypted data, which has no readable text) travel with the turn;
    OpenAI-compatible servers take no reasoning back (DeepSeek refuses it), so none is sent there."""

    text: str = ""
    signature: str | None = None
    redacted: str | None = None


def _empty(value: object) -> bool:
    return not value


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[Part] = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None  # on role "tool": which call this answers
    # on role "tool": the result reports a failure (Anthropic's tool_result `is_error`, which
    # anthropic_agent.py sets on a refused call); left out of a dump when False, so a request
    # without it keeps the cache key it had before this field existed
    is_error: bool = Field(default=False, exclude_if=_empty)
    # the message exactly as it goes on the wire, for a protocol reproducing a client that sends a
    # form of its own (openai_agent.py appends the SDK's parsed message object: its nulls, `parsed`
    # and `parsed_arguments` go back); the OpenAI adapter sends it verbatim. Left out when None.
    wire: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    # on role "assistant": the reply's reasoning, in the provider's order; left out of a dump when
    # empty, so a request without any keeps the cache key it had before this field existed
    reasoning: list[Reasoning] = Field(default_factory=list, exclude_if=_empty)

    def reasoning_text(self) -> str | None:
        """The readable reasoning text (None: the provider returned none)."""
        texts = [r.text for r in self.reasoning if r.text]
        return "\n\n".join(texts) if texts else None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


def _none(value: object) -> bool:
    return value is None


class ToolSpec(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments object
    # OpenAI's function "strict" (openai_agent.py sends true); left out of a dump when None, so a
    # request without it keeps the cache key it had before this field existed
    strict: bool | None = Field(default=None, exclude_if=_none)


class ChatRequest(BaseModel):
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: Literal["auto", "none", "required"] | str | None = None  # a tool name forces that tool
    response_schema: dict[str, Any] | None = None  # structured output: the reply must match it
    # the structured output's name and strictness as sent (openai_agent.py's parse(response_format=
    # Answer) sends name "Answer", strict true); None: the adapter's own ("response", no strict).
    # These three are left out of a dump when None, so other requests keep their cache keys.
    response_name: str | None = Field(default=None, exclude_if=_none)
    response_strict: bool | None = Field(default=None, exclude_if=_none)
    stream: Literal[False] | None = Field(default=None, exclude_if=_none)  # sent as "stream": false when set (the SDK's parse() does)
    temperature: float | None = None  # these four come from the user's settings (models/settings.py),
    top_p: float | None = None  # applied by the ResilientModel; agents and judges leave them None
    reasoning_effort: str | None = None
    max_tokens: int | None = None  # the output limit, sent under the model's own field name
    seed: int | None = None
    # top-k sampling, from the settings as the four above; left out of a dump when None, so every
    # other request keeps the cache key it had before this field existed
    top_k: int | None = Field(default=None, exclude_if=_none)

    def fingerprint(self, model_id: str) -> str:
        """Cache key: the model and every field of the request, canonically serialised."""
        payload = json.dumps([model_id, self.model_dump(mode="json")], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    def has_images(self) -> bool:
        """Whether any message carries an image (without, there is nothing to fit to a model's limits)."""
        return any(isinstance(m.content, list) and any(isinstance(p, ImagePart) for p in m.content)
                   for m in self.messages)


class Usage(BaseModel):
    """Calls, tokens, time and USD cost of one call or of many added up.

    `cost_usd` is None when the cost is unknown (a call's model had no price), never 0: an
    unknown cost added to anything stays unknown. `cost_known` is always `cost_usd is not None`.
    Rows stored before cost_usd could be None read {"cost_usd": 0.0, "cost_known": false} for an
    unknown cost; they load as unknown."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    cost_usd: float | None = 0.0
    cost_known: bool = True
    # output tokens spent on reasoning, when the provider says (part of output_tokens, not added
    # to them); left out of a dump when 0, so stored usage reads as before
    reasoning_tokens: int = Field(default=0, exclude_if=_empty)

    def model_post_init(self, context: Any, /) -> None:
        # after validation (Python or JSON): an unknown cost is None, whichever field said so
        if self.cost_usd is None or not self.cost_known:
            self.cost_usd, self.cost_known = None, False

    def __add__(self, other: Usage) -> Usage:
        a, b = self.cost_usd, other.cost_usd
        return Usage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            seconds=self.seconds + other.seconds,
            cost_usd=a + b if a is not None and b is not None else None,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ChatResponse(BaseModel):
    message: Message
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""
    cached: bool = False
    # the reply's message object as the provider sent it (the OpenAI adapter keeps it): a protocol
    # that reproduces a client echoing the SDK's own message object builds the echo from it
    wire: dict[str, Any] | None = Field(default=None, exclude_if=_none)
    # the provider batch the reply came through (models/batch/), recorded in the transcript; left
    # out of a dump when None, so replies stored before batches read as before
    batch: str | None = Field(default=None, exclude_if=_none)

    @property
    def reasoning(self) -> str | None:
        """The reasoning text the provider returned with this reply (None: none)."""
        return self.message.reasoning_text()


class ChatModel(Protocol):
    """Anything that answers a ChatRequest. `id` names it in caches, prices and reports."""

    id: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


class ModelError(Exception):
    """A failed call, with what the retry policy needs to know.

    `fatal` marks a refusal that is the user's to fix (a bad key, an unknown model, a parameter
    the model does not take): every later call would fail the same way, so the run stops at the
    first one instead of recording every episode as failed. `param` is the request field the
    provider named, when it named one."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None,
                 retry_after: float | None = None, fatal: bool = False, param: str | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.fatal = fatal
        self.param = param


class ProviderRefused(UserError):
    """A provider refused a call for a reason the user must fix; the run stops (exit 2)."""
