"""Claude through the native `anthropic` SDK.

Requests follow the Messages API's rules (https://docs.anthropic.com/en/api/messages), which
tests/sim_anthropic.py enforces: max_tokens always sent (4096 unless the user set one, as the
official MADQA Anthropic agent sends), the system prompt apart, user and assistant turns
alternating (consecutive ones merged), every tool_use answered by tool_result blocks first in
the next user turn (`is_error` on a failed call's), no empty text blocks or empty turns, images
within the vision limits (downscaled with Lanczos, the oldest dropped past the count:
`image_limits.fit_images`). A user turn of plain text goes as the string shorthand ("content":
"..."), as MADQA's anthropic_agent.py sends its question; anything else as content blocks.
Structured output is a forced tool whose input schema is the requested schema; its input comes
back as the reply text (JSON), so callers see the same shape as from OpenAI's json_schema mode.
The SDK's retries are off: the ResilientModel wrapper retries every provider alike. The key
comes from ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a proxy), as the SDK reads them.

Thinking: deskbench never turns extended thinking on (it sends no `thinking` field and refuses a
reasoning effort for Claude), but a reply's `thinking` and `redacted_thinking` blocks are read all
the same, into the message's `reasoning` (text with its signature; redacted data as it came), and
an assistant turn sends them back first, unchanged, as the API requires when thinking is on and a
tool-use loop continues (and ignores when it is off). A turn that would be thinking alone (a reply
cut off while thinking) sends none: an assistant message may not end in a thinking block.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from deskbench.models.capabilities import Capabilities, capabilities
from deskbench.models.image_limits import fit_images
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

RESPOND_TOOL = "respond"
SAMPLING_FIELDS = ("temperature", "top_p", "top_k")


def _image_block(part: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": part.mime, "data": part.data_b64}}


def _blocks(m: Message) -> list[dict[str, Any]]:
    if isinstance(m.content, str):
        return [{"type": "text", "text": m.content}] if m.content.strip() else []
    return [{"type": "text", "text": p.text} if isinstance(p, TextPart) else _image_block(p)
            for p in m.content if not isinstance(p, TextPart) or p.text.strip()]


def _thinking_blocks(m: Message) -> list[dict[str, Any]]:
    """The turn's thinking blocks as Anthropic returned them (signed or redacted); reasoning from
    elsewhere (no signature) cannot be sent to Claude and is left out."""
    out: list[dict[str, Any]] = []
    for r in m.reasoning:
        if r.redacted is not None:
            out.append({"type": "redacted_thinking", "data": r.redacted})
        elif r.signature is not None:
            out.append({"type": "thinking", "thinking": r.text, "signature": r.signature})
    return out


def read_reasoning(block: Any) -> Reasoning | None:
    """A reply's thinking or redacted_thinking block as Reasoning (None: another block)."""
    if block.type == "thinking":
        return Reasoning(text=block.thinking or "", signature=block.signature)
    if block.type == "redacted_thinking":
        return Reasoning(redacted=block.data)
    return None


def _tool_result(m: Message) -> dict[str, Any]:
    text = m.text()
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": text if text.strip() else "(empty)"}
    if m.is_error:  # the call failed or was refused (anthropic_agent.py's "is_error": true)
        block["is_error"] = True
    return block


def _answer_open_calls(messages: list[dict[str, Any]]) -> None:
    """Every tool_use of an assistant turn gets a tool_result first in the next user turn (the
    API refuses the request otherwise). A call the agent left unanswered (a model that called two
    tools where the agent runs one) is answered with a note, and results come before any other
    block of that turn."""
    for i, turn in enumerate(messages):
        if turn["role"] != "assistant":
            continue
        ids = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if not ids:
            continue
        if i + 1 == len(messages) or messages[i + 1]["role"] != "user":
            messages.insert(i + 1, {"role": "user", "content": []})
        nxt = messages[i + 1]["content"]
        answered = {b.get("tool_use_id") for b in nxt if b["type"] == "tool_result"}
        missing = [{"type": "tool_result", "tool_use_id": t, "content": "(not run: one tool call per turn)",
                    "is_error": True} for t in ids if t not in answered]
        results = [b for b in nxt if b["type"] == "tool_result"] + missing
        messages[i + 1]["content"] = results + [b for b in nxt if b["type"] != "tool_result"]


def to_anthropic(request: ChatRequest, caps: Capabilities) -> dict[str, Any]:
    """The Messages API body: system apart, tool results as user blocks, alternating roles merged."""
    system = "\n\n".join(m.text() for m in request.messages if m.role == "system")
    messages: list[dict[str, Any]] = []
    plain: list[dict[str, Any]] = []  # turns that are one user message of plain text (sent as a string)
    for m in fit_images(request.messages, caps):
        if m.role == "system":
            continue
        blocks: list[dict[str, Any]]
        if m.role == "tool":
            role, blocks = "user", [_tool_result(m)]
        else:
            role, blocks = m.role, _blocks(m)
            for call in m.tool_calls:
                arguments: dict[str, Any]
                try:
                    arguments = call.parsed()
                except ValueError:
                    arguments = {"_unparsed": call.arguments}
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
            if blocks and m.role == "assistant":  # thinking first, never alone (see the module docstring)
                blocks = _thinking_blocks(m) + blocks
        if not blocks:
            continue  # an empty turn is refused; its neighbours merge instead
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)  # the API wants user and assistant to alternate
        else:
            messages.append({"role": role, "content": blocks})
            if m.role == "user" and isinstance(m.content, str):
                plain.append(messages[-1])
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation continues)"}]})
    _answer_open_calls(messages)
    for turn in plain:  # a user's plain text goes as the string shorthand, as MADQA's agents send it
        if len(turn["content"]) == 1:  # nothing merged into it, no tool result put before it
            turn["content"] = turn["content"][0]["text"]
    if messages[-1]["role"] == "assistant":  # a prefill: thinking there is refused while thinking is off
        messages[-1]["content"] = [b for b in messages[-1]["content"]
                                   if b["type"] not in ("thinking", "redacted_thinking")]
    max_tokens = request.max_tokens or caps.default_max_tokens or 4096
    body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens}
    if system.strip():
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
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.top_k is not None:
        if not caps.top_k:  # API version 2026-10-21 removed it (capabilities.toml); settings refuse it first
            raise ProviderRefused("Anthropic's Messages API (version 2026-10-21) takes no top_k; drop --sampling-top-k")
        body["top_k"] = request.top_k
    if request.reasoning_effort is not None:
        raise ProviderRefused("Anthropic models take no reasoning effort in deskbench; drop --reasoning-effort")
    return body


def read_reply(raw: Any, *, structured: bool, model: str) -> ChatResponse:
    """A Message (the SDK's, from messages.create or a batch's succeeded result) as a
    ChatResponse; `structured`: the request asked for a response schema, so the forced
    RESPOND_TOOL call is the reply's text (JSON)."""
    texts, calls, reasoning = [], [], []
    for block in raw.content:
        if (thought := read_reasoning(block)) is not None:
            reasoning.append(thought)
        elif block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            if structured and block.name == RESPOND_TOOL:
                texts.append(json.dumps(block.input))
            else:
                calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
    usage = Usage(calls=1, input_tokens=raw.usage.input_tokens or 0, output_tokens=raw.usage.output_tokens or 0)
    return ChatResponse(message=Message(role="assistant", content="\n".join(texts), tool_calls=calls,
                                        reasoning=reasoning),
                        usage=usage, finish_reason=raw.stop_reason, model=raw.model or model)


def _error(exc: Exception) -> ModelError:
    return sdk_error(exc, anthropic.APIStatusError, anthropic.APITimeoutError, anthropic.APIConnectionError)


class AnthropicChat:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 180.0) -> None:
        self.model = model
        self.id = f"anthropic/{model}"
        self.caps = capabilities(self.id)
        self._client = AsyncAnthropic(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            body = to_anthropic(request, self.caps)
            # the SDK (2.x, API version 2026-10-21) has no sampling arguments: a capability file that
            # allows them (a proxy on an older version) gets them into the body as extra fields
            if sampling := {k: body.pop(k) for k in SAMPLING_FIELDS if k in body}:
                body["extra_body"] = sampling
            raw = await self._client.messages.create(model=self.model, **body)
        except anthropic.AnthropicError as exc:
            raise _error(exc) from exc
        return read_reply(raw, structured=request.response_schema is not None, model=self.model)

    async def aclose(self) -> None:
        await self._client.close()
