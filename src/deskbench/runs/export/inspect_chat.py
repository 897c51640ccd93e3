"""A deskbench transcript as Inspect AI chat messages and events (imports inspect_ai: only the
`inspect` export format loads this module).

- `messages`: the episode as one chat: each model call's request messages not already in the
  chat, then its reply. An agent appends the reply to its next request, so a linear episode is
  its last request plus its last reply; a call that starts a new conversation (a summary, a
  sub-call) has its messages appended after the ones before, so nothing sent is left out.
- `events`: one ModelEvent per model call (its full request, its reply or error, usage, timing)
  and one ToolEvent per tool the agent ran (arguments and the full result as JSON text); a
  judge's or grader's calls follow in a span named after it.
- A reply's reasoning (thinking) text is a ContentReasoning part ahead of its text, with the
  signature Anthropic gave it (a redacted block: its encrypted data, `redacted=True`).
- Tool-call arguments are parsed from the JSON text the model returned; text that does not parse
  (the model's mistake, kept on purpose) goes in the call's `parse_error`, verbatim.
- Images by reference become data URIs (a corpus page rendered again from the corpus, a blob
  from the run's store) or, with images off or unavailable, a text placeholder naming the image
  and why it is not shown."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, cast, get_args

from inspect_ai.event import Event, ModelEvent, SpanBeginEvent, SpanEndEvent, ToolEvent
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
    StopReason,
)
from inspect_ai.tool import ToolCall, ToolFunction, ToolInfo

from deskbench.runs.transcript import ModelCallEvent, TranscriptDoc
from deskbench.runs.transcript import ToolEvent as DeskToolEvent

ImageFn = Callable[[str], tuple[bytes, str] | str]
"""An image reference -> (bytes, mime), or why it cannot be shown."""

_STOP_REASONS = set(get_args(StopReason))
_FINISH = {"length": "max_tokens"}
_CONFIG_KEYS = ("temperature", "top_p", "max_tokens", "seed")


class Images:
    """Resolves image references once per export (a page seen in many episodes is read once)."""

    def __init__(self, resolve: ImageFn | None) -> None:
        self._resolve = resolve
        self._done: dict[str, Content] = {}

    def content(self, ref: str) -> Content:
        if ref not in self._done:
            got = self._resolve(ref) if self._resolve is not None else "images are off (--no-images)"
            if isinstance(got, str):
                self._done[ref] = ContentText(text=f"[image {ref}: not shown: {got}]")
            else:
                data, mime = got
                self._done[ref] = ContentImage(image=f"data:{mime};base64,{base64.b64encode(data).decode()}")
        return self._done[ref]


def _content(content: Any, images: Images) -> str | list[Content]:
    if isinstance(content, str) or content is None:
        return content or ""
    out: list[Content] = []
    for part in content:
        if part.get("type") == "image":
            out.append(images.content(str(part.get("ref", ""))))
        else:
            out.append(ContentText(text=str(part.get("text", ""))))
    return out


def tool_call(call: dict[str, Any]) -> ToolCall:
    """A tool call as the model returned it: arguments parsed from its JSON text; text that is
    not a JSON object is kept verbatim in `parse_error`."""
    raw = call.get("arguments", "")
    if isinstance(raw, dict):
        return ToolCall(id=str(call.get("id", "")), function=str(call.get("name", "")), arguments=raw)
    try:
        parsed = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        return ToolCall(id=str(call.get("id", "")), function=str(call.get("name", "")), arguments={},
                        parse_error=f"{exc}; the arguments as returned: {raw}")
    if not isinstance(parsed, dict):
        return ToolCall(id=str(call.get("id", "")), function=str(call.get("name", "")), arguments={},
                        parse_error=f"not a JSON object; the arguments as returned: {raw}")
    return ToolCall(id=str(call.get("id", "")), function=str(call.get("name", "")), arguments=parsed)


def reasoning(blocks: object) -> list[Content]:
    """A reply's reasoning blocks as Inspect's ContentReasoning: the text with its signature, or a
    redacted block's encrypted data (`redacted=True`, as inspect_ai keeps Anthropic's)."""
    out: list[Content] = []
    for r in blocks if isinstance(blocks, list) else []:
        if not isinstance(r, dict):
            continue
        if r.get("redacted"):
            out.append(ContentReasoning(reasoning=str(r["redacted"]), redacted=True))
        else:
            out.append(ContentReasoning(reasoning=str(r.get("text", "")), signature=r.get("signature")))
    return out


class Converter:
    """Transcript message dicts -> Inspect chat messages (tool results get their function's name
    from the call they answer)."""

    def __init__(self, images: Images) -> None:
        self.images = images
        self._functions: dict[str, str] = {}

    def message(self, m: dict[str, Any], model: str | None = None) -> ChatMessage:
        role = m.get("role")
        content = _content(m.get("content"), self.images)
        if role == "system":
            return ChatMessageSystem(content=content)
        if role == "assistant":
            calls = [tool_call(c) for c in m.get("tool_calls") or []]
            self._functions.update({c.id: c.function for c in calls})
            thoughts = reasoning(m.get("reasoning"))
            if thoughts:  # Inspect keeps reasoning as content parts ahead of the text, as providers order it
                content = [*thoughts, *([ContentText(text=content)] if content else [])] if isinstance(content, str) \
                    else [*thoughts, *content]
            return ChatMessageAssistant(content=content, tool_calls=calls or None, model=model)
        if role == "tool":
            call_id = m.get("tool_call_id")
            return ChatMessageTool(content=content, tool_call_id=call_id,
                                   function=self._functions.get(str(call_id)) if call_id is not None else None)
        return ChatMessageUser(content=content)

    def messages(self, ms: Sequence[dict[str, Any]], model: str | None = None) -> list[ChatMessage]:
        return [self.message(m, model) for m in ms]


def _calls(doc: TranscriptDoc) -> list[ModelCallEvent]:
    return [e for e in doc.events if isinstance(e, ModelCallEvent)]


def _reply(call: ModelCallEvent) -> dict[str, Any] | None:
    return call.reply.get("message") if call.reply else None


def chat(doc: TranscriptDoc, images: Images) -> list[ChatMessage]:
    """The episode as one chat (see the module docstring)."""
    convert = Converter(images)
    out: list[ChatMessage] = []
    current: list[dict[str, Any]] = []
    for i, call in enumerate(_calls(doc)):
        request = doc.conversation(i)
        shared = 0
        for a, b in zip(current, request, strict=False):
            if a != b:
                break
            shared += 1
        out += convert.messages(request[shared:], call.model)
        current = list(request)
        reply = _reply(call)
        if reply is not None:
            out.append(convert.message(reply, str(call.reply.get("model") or call.model) if call.reply else call.model))
            current.append(reply)
    return out


def _usage(usage: dict[str, Any] | None) -> ModelUsage | None:
    if not usage:
        return None
    inp, outp = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    return ModelUsage(input_tokens=inp, output_tokens=outp, total_tokens=inp + outp, total_cost=usage.get("cost_usd"))


def _tool_choice(value: object) -> Literal["auto", "any", "none"] | ToolFunction:
    if value in ("auto", "none"):  # narrowed to the two literals
        return value
    if value == "required":
        return "any"
    if isinstance(value, str) and value:
        return ToolFunction(name=value)
    return "auto"


def model_event(doc: TranscriptDoc, index: int, call: ModelCallEvent, convert: Converter, start: datetime,
                span: str | None = None) -> ModelEvent:
    reply = _reply(call)
    model = str((call.reply or {}).get("model") or call.model)
    if reply is not None:
        finish = str((call.reply or {}).get("finish_reason") or "unknown")
        finish = _FINISH.get(finish, finish)
        output = ModelOutput(model=model, usage=_usage((call.reply or {}).get("usage")), time=call.seconds,
                             choices=[ChatCompletionChoice(message=cast(ChatMessageAssistant, convert.message(reply, model)),
                                                           stop_reason=cast(StopReason, finish if finish in _STOP_REASONS
                                                                            else "unknown"))])
    else:
        output = ModelOutput(model=model, error=call.error)
    options = call.options
    config = GenerateConfig(**{k: options[k] for k in _CONFIG_KEYS if options.get(k) is not None})
    return ModelEvent(model=call.model, input=convert.messages(doc.conversation(index), call.model),
                      tools=[ToolInfo(name=str(n), description="") for n in options.get("tools", [])],
                      tool_choice=_tool_choice(options.get("tool_choice")), config=config, output=output,
                      error=call.error, cache="read" if (call.reply or {}).get("cached") else None,
                      timestamp=start + timedelta(seconds=call.at), working_start=call.at,
                      completed=start + timedelta(seconds=call.at + call.seconds), working_time=call.seconds,
                      span_id=span, metadata={"deskbench_options": options} if options else None)


def _tool_event(event: DeskToolEvent, call_id: str, start: datetime, span: str | None) -> ToolEvent:
    return ToolEvent(id=call_id, function=event.name, arguments=event.arguments,
                     result=json.dumps(event.result, ensure_ascii=False, indent=1),
                     timestamp=start + timedelta(seconds=event.at), working_start=event.at, span_id=span)


def events(doc: TranscriptDoc, images: Images, start: datetime, span: str | None = None) -> list[Event]:
    """Every model call and tool of the transcript as Inspect events, in order. A tool event takes
    the id of the latest unanswered call to its function."""
    convert = Converter(images)
    out: list[Event] = []
    pending: list[tuple[str, str]] = []  # (call id, function) returned by the model, not yet run
    index = 0
    for n, event in enumerate(doc.events):
        if isinstance(event, ModelCallEvent):
            out.append(model_event(doc, index, event, convert, start, span))
            index += 1
            pending += [(str(c.get("id", "")), str(c.get("name", ""))) for c in (_reply(event) or {}).get("tool_calls") or []]
        else:
            match = next((p for p in reversed(pending) if p[1] == event.name), None)
            if match is not None:
                pending.remove(match)
            out.append(_tool_event(event, match[0] if match else f"deskbench-tool-{n}", start, span))
    return out


def judge_events(judges: dict[str, TranscriptDoc], images: Images, start: datetime) -> list[Event]:
    """Each judge's or grader's model calls, in a span named after it."""
    out: list[Event] = []
    for name, doc in judges.items():
        span = f"judge-{name}"
        out.append(SpanBeginEvent(id=span, name=f"judge: {name}", type="scorer", timestamp=start, span_id=span))
        out += events(doc, images, start, span)
        out.append(SpanEndEvent(id=span, timestamp=start, span_id=span))
    return out
