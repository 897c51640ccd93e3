"""The protocol of the official openai_agent.py (github OxRML/MADQA baselines/bm25-mllm-agent),
request for request, as its recorded requests show it (tests/data/official_requests/openai.json).

Each iteration sends the script's system prompt and question, one strict `search_documents`
tool, and the answer channel of `client.beta.chat.completions.parse(response_format=Answer)`:
a strict json_schema named "Answer" and `"stream": false`; tool_choice "auto", and "none" on the
last iteration (the model must answer in the structured content). A reply without tool calls is
the answer. A reply with tool calls is appended as the SDK re-serialises its parsed message
object (the fields the server sent, `parsed`, each call's `parsed_arguments`), then one tool
message "Found N matching pages." per search, then one user message "Here are the matching
pages:\\n" with "\\n[Image] File: X, Page: N" and the page (PNG at 200 DPI, detail "high") per hit,
when any search had hits. With --view text the page's text stands in for its image (deskbench's
addition: the script shows images only).

Where the script would stop with an exception (process_dataset.py records it as the question's
error), the episode ends with status "error" after the same requests: content that is not the
Answer JSON (the SDK's parse() raises, even beside tool calls), a reply with neither tool calls
nor content, a reply cut at the output limit or filtered (the SDK raises), a search call without
a "query", a call of a tool it does not offer (the script sends it no result, which the API
refuses on the next request). Effort = searches; search_history as the script keeps it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from deskbench.agents.base import AgentContext, AgentResult, Recorder, describe_problem
from deskbench.models.types import (
    ChatRequest,
    ChatResponse,
    Message,
    Part,
    TextPart,
    ToolCall,
    ToolSpec,
)
from deskbench.tasks.trajectory import Citation
from deskbench.tracks.docqa.agents.bm25_protocols.base import (
    PageSearch,
    labelled_pages,
    official_source,
)
from deskbench.tracks.docqa.agents.bm25_protocols.script_texts import (
    ANSWER_FIELDS,
    FOUND,
    PAGES_HEADER,
    PROMPT_OPENING,
    QUERY_DESCRIPTION,
)
from deskbench.tracks.docqa.agents.prompts import SEARCH_DESCRIPTION
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

SYSTEM_PROMPT = f"{PROMPT_OPENING} and provide:\n{ANSWER_FIELDS}"

SEARCH_TOOL = ToolSpec(
    name="search_documents",
    description=SEARCH_DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": QUERY_DESCRIPTION}},
        "required": ["query"],
        "additionalProperties": False,
    },
    strict=True,
)

# utils.py's Answer as the SDK sends it (pydantic's JSON schema made strict by openai's
# to_strict_json_schema: additionalProperties false on each object), as recorded
ANSWER_SCHEMA: dict[str, Any] = {
    "$defs": {
        "Citation": {
            "description": "Citation for a source document.",
            "properties": {"file": {"title": "File", "type": "string"}, "page": {"title": "Page", "type": "integer"}},
            "required": ["file", "page"],
            "title": "Citation",
            "type": "object",
            "additionalProperties": False,
        },
    },
    "description": "Structured answer with citations.",
    "properties": {
        "answer": {"items": {"type": "string"}, "title": "Answer", "type": "array"},
        "citations": {"items": {"$ref": "#/$defs/Citation"}, "title": "Citations", "type": "array"},
    },
    "required": ["answer", "citations"],
    "title": "Answer",
    "type": "object",
    "additionalProperties": False,
}
ANSWER_NAME = "Answer"

# the fields of the SDK's ParsedChatCompletionMessage and ParsedFunctionToolCall, in its order:
# a dump of the parsed message object has those the server sent, then what parse() adds
MESSAGE_FIELDS = ("content", "refusal", "role", "annotations", "audio", "function_call", "tool_calls")
CALL_FIELDS = ("id", "function", "type")
FUNCTION_FIELDS = ("arguments", "name")


class _Citation(BaseModel):
    file: str
    page: int


class _Answer(BaseModel):
    """The script's Answer model (utils.py): what parse() validates the content against."""

    answer: list[str]
    citations: list[_Citation]


def _page_label(doc: str, page: int) -> str:
    return f"\n[Image] File: {doc}, Page: {page}"


show_pages = labelled_pages(_page_label, detail="high")


class ScriptStop(Exception):
    """Where the official script would raise: the episode ends as an error."""


class OpenAIScript:
    name = "openai_agent.py"
    source = official_source("openai_agent.py")

    async def run(self, task: DocQATask, ctx: AgentContext, rec: Recorder, pages: PageSearch,
                  max_steps: int) -> AgentResult:
        messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task.question)]
        history: list[dict[str, Any]] = []
        for iteration in range(1, max_steps + 1):
            response = await rec.complete(ChatRequest(
                messages=messages, tools=[SEARCH_TOOL], tool_choice="none" if iteration == max_steps else "auto",
                response_schema=ANSWER_SCHEMA, response_name=ANSWER_NAME, response_strict=True, stream=False))
            try:
                parsed = _parse(response)
                calls = response.message.tool_calls
                if not calls:
                    if parsed is None:
                        raise ScriptStop("the reply has neither tool calls nor an answer (openai_agent.py reads "
                                         "message.parsed.answer of None)")
                    return rec.result("ok", DocQASubmission(
                        id=task.id, question=task.question, answer=parsed.answer,
                        citations=[Citation(document=c.file, page=c.page) for c in parsed.citations],
                        steps=len(history), search_history=history, iterations=iteration))
                queries = [_query(call) for call in calls]
            except ScriptStop as exc:
                return rec.result("error", error=f"unparseable answer: {exc}")
            messages.append(response.message.model_copy(update={"wire": sdk_echo(response, parsed)}))
            shown: list[Part] = [TextPart(text=PAGES_HEADER)]
            for call, query in zip(calls, queries, strict=True):
                found = await pages.search(ctx, rec, query, show_pages, tool=SEARCH_TOOL.name)
                history.append({"iteration": iteration, "query": query, "num_results": len(found.hits)})
                messages.append(Message(role="tool", tool_call_id=call.id,
                                        content=FOUND.format(n=len(found.hits))))
                shown += found.parts
            if len(shown) > 1:
                messages.append(Message(role="user", content=shown))
        # unreachable against the API (tool_choice "none" on the last call); the script returns None there
        return rec.result("limit", error=f"no answer after {max_steps} iterations")


def _parse(response: ChatResponse) -> _Answer | None:
    """What the SDK's parse() makes of the reply's content, raising where it raises."""
    if response.finish_reason in ("length", "content_filter"):
        raise ScriptStop(f"finish_reason {response.finish_reason!r} (the SDK's parse() raises on it)")
    wire = response.wire or {}
    content = response.message.content if isinstance(response.message.content, str) else response.message.text()
    if not content or wire.get("refusal"):
        return None
    try:
        return _Answer.model_validate_json(content)
    except ValidationError as exc:
        raise ScriptStop(f"the content is not the Answer JSON ({describe_problem(exc)})") from exc


def _query(call: ToolCall) -> str:
    """The query of a search call, raising where the script (or the SDK, parsing strict tools) raises."""
    if call.name != SEARCH_TOOL.name:
        raise ScriptStop(f"a call of {call.name!r}, which openai_agent.py does not offer (it sends no result for "
                         "it, and the API refuses the next request)")
    try:
        args = json.loads(call.arguments)
    except ValueError as exc:
        raise ScriptStop(f"search_documents arguments are not JSON ({exc})") from exc
    query = args.get("query") if isinstance(args, dict) else None
    if not isinstance(query, str):
        raise ScriptStop("search_documents without a 'query' string")
    return query


def sdk_echo(response: ChatResponse, parsed: _Answer | None) -> dict[str, Any]:
    """The assistant message as openai's SDK sends back the ParsedChatCompletionMessage the script
    appends to `messages`: the fields the server sent (in the SDK's field order, unknown ones
    after), `parsed` (the Answer, or None), and each call's function with `parsed_arguments`."""
    wire = response.wire
    if wire is None:  # a model that is not on OpenAI's wire (scripted): the fields the reply has
        wire = {"content": response.message.content or None, "role": "assistant",
                "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                               for c in response.message.tool_calls]}
    echo = _ordered(wire, MESSAGE_FIELDS)
    if isinstance(wire.get("tool_calls"), list):
        echo["tool_calls"] = [_echo_call(c) for c in wire["tool_calls"]]
    extras = {k: echo.pop(k) for k in list(echo) if k not in MESSAGE_FIELDS}
    return {**echo, "parsed": parsed.model_dump() if parsed is not None else None, **extras}


def _echo_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    out = _ordered(call, CALL_FIELDS)
    function = call.get("function")
    if isinstance(function, dict):
        fn = _ordered(function, FUNCTION_FIELDS)
        extras = {k: fn.pop(k) for k in list(fn) if k not in FUNCTION_FIELDS}
        parsed = None
        if fn.get("name") == SEARCH_TOOL.name and isinstance(fn.get("arguments"), str):
            parsed = json.loads(fn["arguments"])  # strict tools: parse() adds the arguments parsed
        out["function"] = {**fn, "parsed_arguments": parsed, **extras}
    return out


def _ordered(value: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """`value`'s keys in the SDK model's field order, then the others in their order."""
    return {**{k: value[k] for k in order if k in value}, **{k: v for k, v in value.items() if k not in order}}
