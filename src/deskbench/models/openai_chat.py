"""Any OpenAI-compatible chat endpoint as the `openai` SDK calls it (OpenAI, vLLM, Ollama,
llama.cpp, OpenRouter, a LiteLLM proxy, ...). In the plain configuration (a key, a base URL) the
SDK's request is sent without importing the SDK (models/openai_wire.py); otherwise the SDK is the
client.

The SDK's own retries are switched off (max_retries=0): deskbench's retry wrapper treats every
provider alike and honours Retry-After. API keys come from the environment only and are never
put in errors, logs or cache keys.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import deque
from typing import TYPE_CHECKING, Any

from deskbench.models.capabilities import Capabilities, capabilities
from deskbench.models.image_limits import fit_images
from deskbench.models.message_order import tool_results_first
from deskbench.models.openai_wire import DirectPost, WireMessages, direct_post, plain_post
from deskbench.models.sdk_errors import sdk_error
from deskbench.models.types import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    ModelError,
    ProviderRefused,
    Reasoning,
    TextPart,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:  # the SDK is imported only when it is the client (see OpenAIChat)
    from openai import AsyncOpenAI
    from openai._base_client import Platform

# where OpenAI-compatible servers put a reply's reasoning text: DeepSeek, vLLM and llama.cpp's
# server `message.reasoning_content`; OpenRouter (and others) `message.reasoning`. OpenAI's own
# chat completions return none, only usage.completion_tokens_details.reasoning_tokens.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _content(msg: Message) -> str | list[dict[str, Any]]:
    if isinstance(msg.content, str):
        return msg.content
    parts: list[dict[str, Any]] = []
    for p in msg.content:
        if isinstance(p, TextPart):
            parts.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            image_url = {"url": f"data:{p.mime};base64,{p.data_b64}"}
            if p.detail is not None:
                image_url["detail"] = p.detail
            parts.append({"type": "image_url", "image_url": image_url})
    return parts


def to_openai_messages(messages: list[Message], *, null_content: bool = True) -> list[dict[str, Any]]:
    """The wire form. An assistant turn that only calls tools has content null, as OpenAI writes
    it; llama-cpp-python's server rejects null there, so models whose capabilities say so get ""."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.wire is not None:  # a protocol's own form of the message (types.Message.wire), sent as it is
            out.append(m.wire)
            continue
        item: dict[str, Any] = {"role": m.role, "content": _content(m)}
        if m.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ]
            if not m.content:
                item["content"] = None if null_content else ""
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
        out.append(item)
    return out


def _refuse(model_id: str, field: str, why: str) -> ProviderRefused:
    """A request deskbench will not send: the model's capabilities say it would be refused.
    Settings are checked before a run starts, so reaching this is a caller asking for a field
    directly; the message names the capability table, where the rule lives."""
    return ProviderRefused(f"{model_id} {why}, yet the request sets {field}; drop it (or give --capabilities "
                           "FILE if deskbench's capability table is wrong for this model)")


def _tool_choice(request: ChatRequest, caps: Capabilities, tools: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """The tool_choice the model takes for what the request asks, and the tools to send with it.
    A forced tool the server cannot force (Ollama takes no tool_choice) becomes "required" with
    that tool alone, else that tool alone with no choice: the only tool the model can call."""
    choice = request.tool_choice
    if choice is None:
        return None, tools
    if choice in ("auto", "none", "required"):
        if choice in caps.tool_choice:
            return choice, tools
        if choice == "none":  # no tools at all is what "none" means
            return None, []
        return None, tools
    if "named" in caps.tool_choice:
        return {"type": "function", "function": {"name": choice}}, tools
    only = [t for t in tools if t["function"]["name"] == choice] or tools
    return ("required" if "required" in caps.tool_choice else None), only


def wire_order(messages: list[Message], caps: Capabilities) -> list[Message]:
    """The messages in the role order the model takes (models/message_order.py)."""
    return messages if caps.user_after_tool else tool_results_first(messages)


def request_kwargs(request: ChatRequest, caps: Capabilities, model_id: str = "the model") -> dict[str, Any]:
    """The chat.completions body (without `model`), as this model takes it."""
    messages = wire_order(fit_images(request.messages, caps), caps)
    return {"messages": to_openai_messages(messages, null_content=caps.null_content),
            **options_kwargs(request, caps, model_id)}


def options_kwargs(request: ChatRequest, caps: Capabilities, model_id: str = "the model") -> dict[str, Any]:
    """The chat.completions body's fields other than `model` and `messages`."""
    kwargs: dict[str, Any] = {}
    tools = [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters,
                                          **({"strict": t.strict} if t.strict is not None else {})}}
        for t in request.tools
    ]
    choice, tools = _tool_choice(request, caps, tools)
    if tools:
        kwargs["tools"] = tools
        if choice is not None:
            kwargs["tool_choice"] = choice
    if request.response_schema is not None:
        if caps.structured == "json_object":  # llama.cpp's form: grammar-constrained JSON for a schema
            kwargs["response_format"] = {"type": "json_object", "schema": request.response_schema}
        elif caps.structured == "json_schema":
            json_schema: dict[str, object] = {"schema": request.response_schema,
                                              "name": request.response_name or "response"}
            if request.response_strict is not None:
                json_schema["strict"] = request.response_strict
            kwargs["response_format"] = {"type": "json_schema", "json_schema": json_schema}
        # "none" / "tool": the prompt asks for JSON and the reply's text is parsed
    if request.temperature is not None:
        if not caps.temperature:
            raise _refuse(model_id, "temperature", "takes no temperature")
        kwargs["temperature"] = request.temperature
    if request.top_p is not None:
        if not caps.top_p:
            raise _refuse(model_id, "top_p", "takes no top_p")
        kwargs["top_p"] = request.top_p
    if request.top_k is not None:  # not an OpenAI field: in the body where the server documents it
        if not caps.top_k:
            raise _refuse(model_id, "top_k", "takes no top_k")
        kwargs["top_k"] = request.top_k
    if request.reasoning_effort is not None:
        if request.reasoning_effort not in caps.reasoning_effort:
            raise _refuse(model_id, "reasoning_effort", "does not take this reasoning effort")
        kwargs["reasoning_effort"] = request.reasoning_effort
    if request.seed is not None and caps.seed:
        kwargs[caps.seed_field] = request.seed
    if request.max_tokens is not None:
        kwargs[caps.output_limit] = request.max_tokens
    if request.stream is not None:
        kwargs["stream"] = request.stream
    return kwargs


@functools.cache
def _sdk_platform() -> Platform | None:
    """The SDK's platform description (its X-Stainless-OS header), worked out once per process.

    The SDK otherwise works it out on a client's first request, in a worker thread; 64 episodes
    starting together then make 64 thread hops, and their first requests wait for all of them."""
    try:
        from openai._base_client import get_platform
    except ImportError:  # a later SDK without it: it works the platform out itself
        return None
    return get_platform()


class _NewConnectionRamp:
    """Calls that may need a new connection go ahead one per event-loop turn.

    Episodes that start together make their first calls in the same turn of the event loop, and
    a call that needs a new connection cannot send before the loop next polls its sockets: so,
    without this, no first request goes on the wire until every episode has built its own and
    started its connect, and every first call waits for the CPU of all of them. Let through one
    per turn, the first requests go out one after another while the rest are built. A call that
    can reuse a warm connection (fewer calls in flight than the most there have been) is never
    held; a held call waits at most one turn per call ahead of it."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0  # the most calls in flight so far: about the connections the pool holds
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._passed_this_turn = False

    async def turn(self) -> None:
        if self.in_flight < self.peak:
            return
        loop = asyncio.get_running_loop()
        if not self._passed_this_turn and not self._waiting:
            self._passed_this_turn = True
            loop.call_soon(self._next_turn)
            return
        waiter = loop.create_future()
        self._waiting.append(waiter)
        await waiter

    def _next_turn(self) -> None:
        self._passed_this_turn = False
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():  # a cancelled waiter (its call timed out) is skipped
                waiter.set_result(None)
                self._passed_this_turn = True
                asyncio.get_running_loop().call_soon(self._next_turn)
                return


def _error(exc: Exception) -> ModelError:
    import openai

    return sdk_error(exc, openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError)


class OpenAIChat:
    """A chat model on an OpenAI-compatible endpoint.

    With base_url and api_key left as None the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY
    itself, exactly as it always does.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, id: str | None = None, caps: Capabilities | None = None) -> None:
        self.model = model
        self.id = id or f"openai/{model}"
        self.caps = caps or capabilities(self.id)
        self._settings: dict[str, Any] = {"base_url": base_url, "api_key": api_key, "timeout": timeout}
        self._client: AsyncOpenAI | None = None  # the SDK's, made when it is the client
        # the plain configuration needs no SDK (models/openai_wire.py plain_post); otherwise the
        # SDK's client, made now: it checks the key now, not at the first call
        self._direct: DirectPost | None = plain_post(api_key, base_url, "/chat/completions", timeout)
        if self._direct is None:
            self._client = self._new_client()
            self._direct = direct_post(self._client, "/chat/completions", timeout)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ramp = _NewConnectionRamp()
        null_content = self.caps.null_content
        self._wire = WireMessages(lambda m: to_openai_messages([m], null_content=null_content)[0])

    def _new_client(self) -> AsyncOpenAI:
        import openai

        try:
            # aiohttp as the SDK's transport (its documented option "for improved concurrency"):
            # httpx's pool walks every connection on every request, which cost ~3 ms a call at 64.
            client = openai.AsyncOpenAI(**self._settings, max_retries=0, http_client=openai.DefaultAioHttpClient())
        except openai.OpenAIError as exc:  # e.g. no OPENAI_API_KEY in the environment
            from deskbench.errors import UserError

            raise UserError(f"cannot use {self.id}: {exc}") from exc
        if getattr(client, "_platform", False) is None and (known := _sdk_platform()) is not None:
            client._platform = known  # see _sdk_platform
        return client

    def _loop_here(self) -> None:
        """Connections belong to one event loop, and the same model may serve several
        `asyncio.run`s (a run, then its judge): a new loop gets new ones."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            if self._direct is not None:
                self._direct.discard()  # its session belongs to the loop that is gone
            self._client = None
            self._ramp = _NewConnectionRamp()  # the new pool is empty
        self._loop = loop

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self._loop_here()
        ramp = self._ramp
        await ramp.turn()
        ramp.in_flight += 1
        ramp.peak = max(ramp.peak, ramp.in_flight)
        try:
            if self._direct is not None:  # models/openai_wire.py: the same bytes and headers, ~0.5 ms less CPU
                messages = wire_order(fit_images(request.messages, self.caps), self.caps)
                raw = await self._direct.post(self._wire.body(self.model, messages, options_kwargs(request, self.caps, self.id)))
            else:
                raw = await self._sdk_post(request)
        finally:
            ramp.in_flight -= 1
        return parse_completion(raw, self.model)

    async def _sdk_post(self, request: ChatRequest) -> object:
        """The SDK's generic POST: same auth, errors and transport as chat.completions.create,
        without its per-call walk of the request through typed-dict transforms (~18 ms of CPU per
        call on long conversations) or the response model's construction (cast_to object keeps
        the parsed JSON); `parse_completion` reads what deskbench needs."""
        import openai

        if self._client is None:
            self._client = self._new_client()
        body = {"model": self.model, **request_kwargs(request, self.caps, self.id)}
        try:
            return await self._client.post("/chat/completions", body=body, cast_to=object)
        except openai.OpenAIError as exc:
            raise _error(exc) from exc

    async def aclose(self) -> None:
        if self._direct is not None:
            await self._direct.aclose()
        if self._client is not None:
            await self._client.close()
        self._client, self._loop = None, None  # a later call makes a new client, in its own loop


def parse_completion(raw: object, model: str) -> ChatResponse:
    """A chat.completion body as a ChatResponse; a body of the wrong shape is a retryable error
    (a proxy's HTML page, a truncated reply), never a crash deep in an agent."""
    if not isinstance(raw, dict):
        raise ModelError(f"the response is not a JSON object ({type(raw).__name__})", retryable=True)
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError("the response has no choices", retryable=True)
    choice = choices[0]
    msg = choice.get("message")
    if not isinstance(msg, dict):
        raise ModelError("the response's first choice has no message", retryable=True)
    calls = []
    for i, c in enumerate(msg.get("tool_calls") or []):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue  # custom (non-function) calls are skipped
        args = fn.get("arguments")
        calls.append(ToolCall(id=str(c.get("id") or f"call_{i}"), name=fn["name"],
                              arguments=args if isinstance(args, str) else json.dumps(args) if args else ""))
    usage = Usage(calls=1)
    if isinstance(u := raw.get("usage"), dict):
        usage.input_tokens = _int(u.get("prompt_tokens"))
        usage.output_tokens = _int(u.get("completion_tokens"))
        details = u.get("completion_tokens_details")
        usage.reasoning_tokens = _int(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    content = msg.get("content")
    return ChatResponse(
        message=Message(role="assistant", content=content if isinstance(content, str) else "", tool_calls=calls,
                        reasoning=reasoning(msg)),
        usage=usage,
        finish_reason=choice.get("finish_reason"),
        model=str(raw.get("model") or model),
        wire=msg,
    )


def reasoning(msg: dict[str, Any]) -> list[Reasoning]:
    """The reply's reasoning text, each distinct text once (a server may fill both fields with
    the same text). Kept apart from the content and never sent back: to_openai_messages leaves it
    out, as DeepSeek requires (a request carrying reasoning_content is refused with 400)."""
    texts: list[str] = []
    for name in REASONING_FIELDS:
        value = msg.get(name)
        if isinstance(value, str) and value and value not in texts:
            texts.append(value)
    return [Reasoning(text=t) for t in texts]


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
