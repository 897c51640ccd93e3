"""Ask a judge model for one JSON object, validate it with pydantic, give it one repair turn.

The analytics judges (AIDABench Listings 2-4) reply in plain JSON rather than through a forced
tool call, because the paper's prompts ask for JSON text. The request carries the schema as
structured output where the endpoint supports it; endpoints that ignore it may still wrap the
object in prose or a markdown fence, so the reply is searched for the last object that
validates. A reply that never validates, or a call that fails after the model wrapper's retries
(wrap the judge in ResilientModel), comes back as an error: the caller reports the item
unscored, never wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from deskbench.models.types import ChatModel, ChatRequest, Message, ModelError

M = TypeVar("M", bound=BaseModel)


@dataclass
class JsonReply(Generic[M]):
    """The validated object, or None and why; `calls` counts the model calls made."""

    value: M | None
    error: str | None = None
    calls: int = 0
    raw: list[str] = field(default_factory=list)  # every reply text, for the record


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in `text`, left to right (prose and ``` fences around them
    are skipped; an object nested in another is not listed on its own)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        i = text.find("{", end)
    return found


def describe(exc: Exception) -> str:
    """One line naming the first problem: the field and pydantic's message, or the error text."""
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "object"
        return f"{where}: {err['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def parse_reply(text: str, schema: type[M], check: Callable[[M], None] | None = None) -> M:
    """The last JSON object in `text` that validates against `schema` (and passes `check`).

    The last, because a judge that reasons before answering puts its verdict at the end.
    Raises ValueError naming the problem of the last candidate when none is valid."""
    candidates = json_objects(text)
    if not candidates:
        raise ValueError("no JSON object in the reply")
    problem: Exception | None = None
    for obj in reversed(candidates):
        try:
            value = schema.model_validate(obj)
            if check is not None:
                check(value)
            return value
        except (ValidationError, ValueError) as exc:
            problem = problem or exc
    assert problem is not None
    raise ValueError(describe(problem))


async def ask_json(
    model: ChatModel,
    messages: Sequence[Message],
    schema: type[M],
    *,
    response_schema: dict[str, Any] | None = None,
    check: Callable[[M], None] | None = None,
    shape: str = "",
    repairs: int = 1,
) -> JsonReply[M]:
    """One call for a JSON object of `schema`, plus `repairs` turns naming what was wrong.

    `response_schema` defaults to the pydantic schema of `schema`; `shape` is the object's form
    shown in the repair turn; `check` adds rules pydantic cannot express (raise ValueError)."""
    wire_schema = response_schema if response_schema is not None else schema.model_json_schema()
    history = list(messages)
    raw: list[str] = []
    problem = ""
    for attempt in range(1 + repairs):
        request = ChatRequest(messages=history, response_schema=wire_schema)
        try:
            response = await model.complete(request)
        except ModelError as exc:
            return JsonReply(None, error=f"judge call failed: {exc}", calls=attempt + 1, raw=raw)
        text = response.message.text()
        # a model that answers through a tool call anyway: its arguments are the object
        text = "\n".join([text, *(c.arguments for c in response.message.tool_calls)])
        raw.append(text)
        try:
            return JsonReply(parse_reply(text, schema, check), calls=attempt + 1, raw=raw)
        except ValueError as exc:
            problem = describe(exc)
        history = [
            *history,
            Message(role="assistant", content=response.message.text()),
            Message(role="user", content=f"Your reply could not be read ({problem}). Output JSON only: "
                                         f"one object {shape or 'with the requested fields'}."),
        ]
    return JsonReply(None, error=f"no valid JSON reply after {1 + repairs} tries: {problem}",
                     calls=1 + repairs, raw=raw)
