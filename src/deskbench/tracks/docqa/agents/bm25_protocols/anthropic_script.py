"""The official Anthropic protocol: what github OxRML/MADQA baselines/bm25-mllm-agent/
anthropic_agent.py (AnthropicSearchAgent.answer_question) sends, request for request.

- The script's own system prompt (with its appended paragraph on the search tool's input),
  max_tokens 4096 (the adapter's default for Claude), the question as the first user message.
- Tools `search_documents` and `provide_answer` with the script's descriptions and schemas, no
  tool_choice; on the last iteration `provide_answer` alone, forced (tool_choice
  {"type": "tool", "name": "provide_answer"}).
- A reply that stops for tool use and calls `provide_answer` without a search ends the episode
  with that call's input, read as the script reads it (a string answer becomes a one-item list,
  citations that are not a list are dropped). Otherwise the assistant turn goes back (its text
  and tool_use blocks), then ONE user turn: every tool_result first ("Found N matching pages.";
  a `provide_answer` beside a search and an unknown tool get the script's texts with
  `is_error: true`), then for each page found a text block "\\nFile: X, Page: N" and the page
  image. A stop for tool use without any tool call repeats the same request, as the script does.
- A reply that stops for another reason (end_turn, max_tokens, ...) ends the episode with the
  reply's text as the answer (or "Unable to generate answer"), no citations, and the error
  "Unexpected stop reason: <reason>" on the submission: the script's own row.
- Images: the page at 200 DPI (ctx.settings.dpi) as a PNG; while its base64 text exceeds 5 MiB
  (5 * 1024 * 1024 characters, Anthropic's limit as the script measures it), the page is redrawn
  from the original at 0.9, 0.81, ... of its size (Lanczos), each size measured as Pillow writes
  the PNG of the RGB image (utils.image_to_base64), as the script does. deskbench's own --max-
  image-bytes does not apply: the script has its own rule.

Where the script would crash, the request shape is kept up to that point and the episode ends
with an error naming why (the script raises, process_dataset.py writes an error row):
a search call without a string "query" (the script's `tool_use.input["query"]`).

Known differences, none in the recorded scenario (tests/tracks/docqa/test_official_requests_anthropic.py):
- retries are the adapter's (deskbench's ResilientModel: 5 attempts, backoff with jitter on 429,
  5xx, timeouts); the script makes 3 attempts on 5xx and 429 (waits 2 s, 3 s), each through the
  SDK's own 2 retries;
- the adapter joins a reply's text blocks into one and puts it before the tool calls; the script
  sends each text block back where it was (Claude without extended thinking replies text, then
  tool calls); a whitespace-only text block is dropped (the API refuses it; the script sends it);
- past 20 images in a request the adapter downscales pages to 2000 px a side (the API's
  many-image limit); the script sends them at 200 DPI and the API refuses the request;
- the anthropic-version header is the SDK's: anthropic 2.x (recorded with 2.14.0, deskbench's)
  sends 2026-10-21, the 0.x SDKs of the script's time 2023-06-01; the script asks for anthropic>=0.39.0 and
  which one the leaderboard's runs used is not recorded;
- whether a page needs the 5 MB loop depends on the PNG Pillow writes, so on Pillow's version
  and its zlib (the installed one measures: 13.0.0 when recorded, the same on both sides).
Stop reasons come from Anthropic's `stop_reason`; with another provider (this protocol named
explicitly) a reply with tool calls counts as "tool_use".
"""

from __future__ import annotations

from typing import Any, Literal

from deskbench.agents.base import AgentContext, AgentResult, Recorder
from deskbench.models.types import ChatRequest, ChatResponse, Message, Part, ToolCall
from deskbench.tracks.docqa.agents.bm25_protocols.base import (
    PageSearch,
    ShrunkPages,
    official_source,
    script_submission,
)
from deskbench.tracks.docqa.agents.bm25_protocols.script_texts import (
    ANSWER_TOOL,
    FOUND,
    LIMIT_ANSWER,
    SEARCH_TOOL,
    TOOL_PROMPT,
)
from deskbench.tracks.docqa.tasks import DocQATask

SCRIPT = "anthropic_agent.py"

SYSTEM_PROMPT = (f"{TOOL_PROMPT}\n\nAlways call the search_documents tool with an input object that contains ONLY the key "
                 '"query" with a string value. Do not include any other fields (no lists, alternate keys, or metadata).')
"""The script's system prompt, its appended instruction on the search tool's input included."""

WAIT = "Please wait for the search results before providing an answer."
NOT_AVAILABLE = "Error: Tool '{name}' is not available in this context."
NO_ANSWER = "Unable to generate answer"

MAX_BASE64 = 5 * 1024 * 1024
"""The script's image limit: the base64 text of the PNG, in characters."""
STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
                          "model_context_window_exceeded"})
"""Anthropic's stop_reason values (Messages API reference); another provider's finish reason is read
by whether the reply called tools."""


PAGE_IMAGES = ShrunkPages(MAX_BASE64)
"""The script's page blocks: "\\nFile: X, Page: N", then the image, shrunk by its 5 MB loop."""


def stopped_for_tools(response: ChatResponse) -> bool:
    """The script's `response.stop_reason == "tool_use"`."""
    if response.finish_reason in STOP_REASONS:
        return response.finish_reason == "tool_use"
    return bool(response.message.tool_calls)


class AnthropicScriptProtocol:
    name = SCRIPT
    source = official_source(SCRIPT)

    async def run(self, task: DocQATask, ctx: AgentContext, rec: Recorder, pages: PageSearch,
                  max_steps: int) -> AgentResult:
        messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task.question)]
        history: list[dict[str, Any]] = []  # the script's search_history
        for iteration in range(1, max_steps + 1):
            last = iteration == max_steps
            response = await rec.complete(ChatRequest(
                messages=messages,
                tools=[ANSWER_TOOL] if last else [SEARCH_TOOL, ANSWER_TOOL],
                tool_choice=ANSWER_TOOL.name if last else None,
            ))
            reply = response.message
            if not stopped_for_tools(response):
                return self._finish(rec, task, {"answer": [reply.text() or NO_ANSWER], "citations": []},
                                    iteration, history, f"Unexpected stop reason: {response.finish_reason}")
            calls = reply.tool_calls
            if not calls:
                continue  # the script logs it and asks again with the same messages
            answer = next((c for c in calls if c.name == ANSWER_TOOL.name), None)
            if answer is not None and not any(c.name == SEARCH_TOOL.name for c in calls):
                return self._answer(rec, task, answer, iteration, history)
            messages.append(reply)
            results: list[Message] = []
            shown: list[Part] = []
            for call in calls:
                if call.name == SEARCH_TOOL.name:
                    query = _query(call)
                    if query is None:
                        return rec.result("error", error=(
                            f"search_documents was called without a string 'query' ({call.arguments[:80]}): "
                            f"the official {SCRIPT} raises here and records the question as failed"))
                    found = await pages.search(ctx, rec, query, load=PAGE_IMAGES.load, tool=SEARCH_TOOL.name)
                    history.append({"iteration": iteration, "query": query, "num_results": len(found.hits)})
                    results.append(Message(role="tool", tool_call_id=call.id, content=FOUND.format(n=len(found.hits))))
                    shown.extend(found.parts)
                elif call.name == ANSWER_TOOL.name:
                    results.append(Message(role="tool", tool_call_id=call.id, content=WAIT, is_error=True))
                else:
                    results.append(Message(role="tool", tool_call_id=call.id,
                                           content=NOT_AVAILABLE.format(name=call.name), is_error=True))
            messages.extend(results)  # every tool_result first, then the pages, in one user turn
            if shown:
                messages.append(Message(role="user", content=shown))
        return self._finish(rec, task, {"answer": [LIMIT_ANSWER], "citations": []}, max_steps, history,
                            "Maximum iterations reached", status="limit")

    def _answer(self, rec: Recorder, task: DocQATask, call: ToolCall, iteration: int,
                history: list[dict[str, Any]]) -> AgentResult:
        """The script's reading of a provide_answer input."""
        try:
            data = call.parsed()
        except ValueError as exc:
            return rec.result("error", error=f"provide_answer arguments are not a JSON object ({exc}): "
                                             f"the official {SCRIPT} raises here")
        answer = data.get("answer", [])
        if isinstance(answer, str):
            answer = [answer]
        elif not isinstance(answer, list):
            answer = [str(answer)] if answer else ["Unable to parse answer"]
        citations = data.get("citations", [])
        return self._finish(rec, task, {"answer": answer, "citations": citations if isinstance(citations, list) else []},
                            iteration, history, None)

    @staticmethod
    def _finish(rec: Recorder, task: DocQATask, row: dict[str, Any], iteration: int,
                history: list[dict[str, Any]], error: str | None, *, status: Literal["ok", "limit"] = "ok") -> AgentResult:
        """The episode's result from the row the script would write; citations it cannot read as
        pages are dropped (and named in the error), not the whole answer."""
        submission = script_submission(task, row["answer"], row["citations"], iteration, history, error)
        if status == "limit":
            return rec.result("limit", submission, error=error)
        return rec.result("ok", submission)


def _query(call: ToolCall) -> str | None:
    """The call's "query" when it is a string (None: the script would raise)."""
    try:
        query = call.parsed().get("query")
    except ValueError:
        return None
    return query if isinstance(query, str) else None
