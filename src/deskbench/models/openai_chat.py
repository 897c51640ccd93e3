"""Any OpenAI-compatible chat endpoint through the `openai` SDK (OpenAI, vLLM, Ollama, llama.cpp,
OpenRouter, a LiteLLM proxy, ...).

The SDK's own retries are switched off (max_retries=0): deskbench's retry wrapper treats every
provider alike and honours Retry-After. API keys come from the environment only and are never
put in errors, logs or cache keys.
"""

from __future__ import annotations

from typing import Any

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from deskbench.models.sdk_errors import sdk_error
from deskbench.models.types import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    ModelError,
    TextPart,
    ToolCall,
    Usage,
)


def _content(msg: Message) -> str | list[dict[str, Any]]:
    if isinstance(msg.content, str):
        return msg.content
    parts: list[dict[str, Any]] = []
    for p in msg.content:
        if isinstance(p, TextPart):
            parts.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            parts.append({"type": "image_url", "image_url": {"url": f"data:{p.mime};base64,{p.data_b64}"}})
    return parts


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": _content(m)}
        if m.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ]
            if not m.content:
                item["content"] = None
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
        out.append(item)
    return out


def request_kwargs(request: ChatRequest, structured: str = "json_schema") -> dict[str, Any]:
    kwargs: dict[str, Any] = {"messages": to_openai_messages(request.messages)}
    if request.tools:
        kwargs["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
    if request.tool_choice in ("auto", "none", "required"):
        kwargs["tool_choice"] = request.tool_choice
    elif request.tool_choice:
        kwargs["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    if request.response_schema is not None:
        if structured == "json_object":  # llama.cpp's form: grammar-constrained JSON for a schema
            kwargs["response_format"] = {"type": "json_object", "schema": request.response_schema}
        else:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.response_schema},
            }
    for name in ("temperature", "seed"):
        value = getattr(request, name)
        if value is not None:
            kwargs[name] = value
    if request.max_tokens is not None:
        kwargs["max_tokens"] = request.max_tokens
    return kwargs


def _error(exc: Exception) -> ModelError:
    return sdk_error(exc, openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError)


class OpenAIChat:
    """A chat model on an OpenAI-compatible endpoint.

    With base_url and api_key left as None the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY
    itself, exactly as it always does.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, id: str | None = None, structured: str = "json_schema") -> None:
        self.model = model
        self.structured = structured
        self.id = id or f"openai/{model}"
        try:
            self._client = AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
        except openai.OpenAIError as exc:  # e.g. no OPENAI_API_KEY in the environment
            from deskbench.errors import UserError

            raise UserError(f"cannot use {self.id}: {exc}") from exc

    async def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            # The SDK's generic POST: same auth, errors and response model as chat.completions.create,
            # without its per-call walk of the request through typed-dict transforms, which cost
            # ~18 ms of CPU per call on long conversations and capped throughput at 64 episodes.
            raw = await self._client.post(
                "/chat/completions",
                body={"model": self.model, **request_kwargs(request, self.structured)},
                cast_to=ChatCompletion,
            )
        except openai.OpenAIError as exc:
            raise _error(exc) from exc
        if not raw.choices:
            raise ModelError("the response has no choices", retryable=True)
        choice = raw.choices[0]
        msg = choice.message
        calls = [
            ToolCall(id=c.id or f"call_{i}", name=fn.name, arguments=fn.arguments or "")
            for i, c in enumerate(msg.tool_calls or [])
            if (fn := getattr(c, "function", None)) is not None  # custom (non-function) calls are skipped
        ]
        usage = Usage(calls=1)
        if raw.usage is not None:
            usage.input_tokens = raw.usage.prompt_tokens or 0
            usage.output_tokens = raw.usage.completion_tokens or 0
        return ChatResponse(
            message=Message(role="assistant", content=msg.content or "", tool_calls=calls),
            usage=usage,
            finish_reason=choice.finish_reason,
            model=raw.model or self.model,
        )

    async def aclose(self) -> None:
        await self._client.close()
