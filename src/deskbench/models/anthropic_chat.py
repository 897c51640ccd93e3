"""Claude through the native `anthropic` SDK.

Images over 5 MB are downscaled with Lanczos before sending, as MADQA did. Structured output is
a forced tool whose input schema is the requested schema; its input comes back as the reply text
(JSON), so callers see the same shape as from OpenAI's json_schema mode. The SDK's retries are
off: the ResilientModel wrapper retries every provider alike. The key comes from
ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a proxy), as the SDK reads them.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import anthropic
from anthropic import AsyncAnthropic
from PIL import Image

from deskbench.corpus.images import shrink_to_bytes
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

MAX_IMAGE_BYTES = 5 * 1024 * 1024
RESPOND_TOOL = "respond"


def _image_block(part: ImagePart) -> dict[str, Any]:
    data, mime = part.data, part.mime
    if len(data) > MAX_IMAGE_BYTES:
        data = shrink_to_bytes(Image.open(io.BytesIO(data)).convert("RGB"), "png", MAX_IMAGE_BYTES)
        mime = "image/png"
    return {"type": "image", "source": {"type": "base64", "media_type": mime,
                                        "data": base64.b64encode(data).decode("ascii")}}


def _blocks(m: Message) -> list[dict[str, Any]]:
    if isinstance(m.content, str):
        return [{"type": "text", "text": m.content}] if m.content else []
    return [{"type": "text", "text": p.text} if isinstance(p, TextPart) else _image_block(p) for p in m.content]


def to_anthropic(request: ChatRequest) -> dict[str, Any]:
    """The Messages API body: system apart, tool results as user blocks, alternating roles merged."""
    system = "\n\n".join(m.text() for m in request.messages if m.role == "system")
    messages: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "system":
            continue
        blocks: list[dict[str, Any]]
        if m.role == "tool":
            role, blocks = "user", [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.text()}]
        else:
            role, blocks = m.role, _blocks(m)
            for call in m.tool_calls:
                arguments: dict[str, Any]
                try:
                    arguments = call.parsed()
                except ValueError:
                    arguments = {"_unparsed": call.arguments}
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)  # the API wants user and assistant to alternate
        else:
            messages.append({"role": role, "content": blocks})
    body: dict[str, Any] = {"messages": messages, "max_tokens": request.max_tokens or 4096}
    if system:
        body["system"] = system
    tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools]
    choice = request.tool_choice
    if request.response_schema is not None:
        tools.append({"name": RESPOND_TOOL, "description": "Reply with the requested JSON object.",
                      "input_schema": request.response_schema})
        choice = RESPOND_TOOL
    if tools:
        body["tools"] = tools
    if choice == "auto":
        body["tool_choice"] = {"type": "auto"}
    elif choice == "required":
        body["tool_choice"] = {"type": "any"}
    elif choice == "none":
        body["tool_choice"] = {"type": "none"}
    elif choice:
        body["tool_choice"] = {"type": "tool", "name": choice}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _error(exc: Exception) -> ModelError:
    return sdk_error(exc, anthropic.APIStatusError, anthropic.APITimeoutError, anthropic.APIConnectionError)


class AnthropicChat:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 180.0) -> None:
        self.model = model
        self.id = f"anthropic/{model}"
        self._client = AsyncAnthropic(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            raw = await self._client.messages.create(model=self.model, **to_anthropic(request))
        except anthropic.AnthropicError as exc:
            raise _error(exc) from exc
        texts, calls = [], []
        for block in raw.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                if request.response_schema is not None and block.name == RESPOND_TOOL:
                    texts.append(json.dumps(block.input))
                else:
                    calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
        usage = Usage(calls=1, input_tokens=raw.usage.input_tokens or 0, output_tokens=raw.usage.output_tokens or 0)
        return ChatResponse(message=Message(role="assistant", content="\n".join(texts), tool_calls=calls),
                            usage=usage, finish_reason=raw.stop_reason, model=raw.model or self.model)

    async def aclose(self) -> None:
        await self._client.close()
