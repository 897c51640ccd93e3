"""The official vLLM protocol: what github OxRML/MADQA baselines/bm25-mllm-agent/vllm_agent.py
(VLLMSearchAgent.answer_question) sends to an OpenAI-compatible server, request for request
(recorded in tests/data/official_requests/vllm.json). The official protocol of deskbench's
vllm/, openai-compat/, llamacpp/, ollama/ and local providers; on Mistral's API it runs as
"vllm_agent.py@mistral" (see MISTRAL below).

- The script's system prompt, the question as the first user message; tools `search_documents`
  and `provide_answer` (its descriptions and schemas) on every request, tool_choice "auto".
- On the last iteration the request adds, for that request only, the user message "You must now
  provide your final answer using the provide_answer tool based on what you've found." and forces
  provide_answer (tool_choice {"type": "function", "function": {"name": "provide_answer"}}).
- When a call fails (the script catches any exception) the same iteration is asked once more
  without tool_choice and without the forcing message; when that fails too the episode ends with
  the error (the script raises; process_dataset.py records the question as failed). deskbench's
  retry wrapper retries 429 / 5xx / timeouts before that (the script's SDK makes 2 retries).
- A reply with tool calls: the first provide_answer whose arguments are JSON ends the episode
  with its "answer" and "citations" as given (even beside searches; a string answer is kept as
  the script keeps it). Otherwise the assistant message goes back as the script rebuilds it
  (role, the reply's content as the server sent it, tool_calls with id, type, name and the raw
  arguments); then, per call in order: a search gets the tool message "Found N matching pages."
  and, when it found pages, at once a user message "Here are the matching pages:\\n" followed by
  "\\nFile: X, Page: N" and the page (PNG at 200 DPI, detail "high") per hit; a search whose
  arguments are empty or have no "query" gets "Error: Invalid search query format"; a
  provide_answer with empty arguments gets "Answer recorded."; a call of any other tool gets no
  message at all (as the script does; vLLM does not check).
- A reply without tool calls is the answer, read from its text as the script reads it: the
  first-to-last brace span holding "answer" as JSON, else the rest of a line after "answer:",
  else the whole text; no citations unless the JSON has them.
- After the last iteration without an answer the episode ends with status "limit" (the script
  returns the answer "Maximum iterations reached without answer", scored as a wrong answer).
- Images: while the PNG's base64 text exceeds 4 MiB the page is redrawn from the original at
  0.9, 0.81, ... of its size (Lanczos), as the script's _load_page_image does.

Where the script would crash, the requests are the same up to there and the episode ends as an
error naming why: a call whose arguments are neither empty nor JSON (the script parses every
call's arguments for its trajectory before anything else, so its own "Answer recorded." and
"Invalid search query format" paths for such arguments are never reached; the recording shows
it), search arguments that are JSON but not an object, a "query" that is not a string.

Known differences from the script, none on the recorded requests: retries are deskbench's (its
retry wrapper: 429, 5xx and timeouts with backoff) where the script's SDK makes 2; an assistant
turn whose content the server sent as null goes back as the adapter sends an empty content (null,
or "" to servers whose capabilities refuse null: llama.cpp, the bundled local model, unknown
OpenAI-compatible servers); a server that cannot force a tool (Ollama) gets the forced request
with provide_answer alone (the adapter's rule); with --view text (a text-only model) the page's
text stands where its image would be (the script shows images only).

MISTRAL: no official mistral_agent.py is published (process_dataset.py imports it optionally and
the repository lacks it). "vllm_agent.py@mistral" is this protocol unchanged, sent through
Mistral's chat API by the mistral/ adapter, which makes these differences on the wire
(tests/tracks/docqa/test_official_requests_vllm.py checks that they are the only ones):
1. the role order Mistral enforces: an assistant turn's tool results go right after it, together,
   in the order of the calls, and an assistant turn "OK." (models/message_order.py) comes
   between the last result and the following user message (page messages, the forcing message);
2. at most 8 images a request (Mistral's limit): older page images become a line of text saying so;
3. the sampling seed, when one is set, is sent as random_seed; tool call ids are Mistral's own.
"""

from __future__ import annotations

import json
import re
from typing import Any

from PIL import Image

from deskbench.agents.base import AgentContext, AgentResult, Recorder
from deskbench.models.types import (
    ChatRequest,
    ChatResponse,
    Message,
    ModelError,
    ProviderRefused,
)
from deskbench.tracks.docqa.agents.bm25_protocols import base
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
    PAGES_HEADER,
    SEARCH_TOOL,
    TOOL_PROMPT,
)
from deskbench.tracks.docqa.tasks import DocQATask

SCRIPT = "vllm_agent.py"
MISTRAL_NAME = "vllm_agent.py@mistral"
MISTRAL_SOURCE = (f"{official_source(SCRIPT)}, sent through Mistral's chat API (no official mistral_agent.py "
                  "exists; differences: role order after tool results, 8 images, random_seed)")

SYSTEM_PROMPT = f"{TOOL_PROMPT}\n\nAlways use one of the available tools (search_documents or provide_answer)."

FORCE = "You must now provide your final answer using the provide_answer tool based on what you've found."
BAD_QUERY = "Error: Invalid search query format"
ANSWER_RECORDED = "Answer recorded."

MAX_BASE64 = 4 * 1024 * 1024
"""The script's image limit: the base64 text of the PNG, in characters ("be conservative")."""

_JSON_ANSWER = re.compile(r'\{[\s\S]*"answer"[\s\S]*\}')
_LINE_ANSWER = re.compile(r"(?:answer|Answer|ANSWER)[:\s]+([^\n]+)")


def shrink(page: Image.Image, max_base64: int = MAX_BASE64) -> tuple[int, bytes]:
    """The script's _load_page_image loop on `page`: how many 0.9 steps it takes and the PNG it sends."""
    return base.shrink(page, max_base64)


PAGE_IMAGES = ShrunkPages(MAX_BASE64, detail="high", header=PAGES_HEADER)
"""The script's page message content: the header, then "\\nFile: X, Page: N" and the page (detail "high") per hit."""


class VllmScriptProtocol:
    """vllm_agent.py's loop (see the module docstring)."""

    name = SCRIPT
    source = official_source(SCRIPT)

    async def run(self, task: DocQATask, ctx: AgentContext, rec: Recorder, pages: PageSearch,
                  max_steps: int) -> AgentResult:
        messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=task.question)]
        tools = [SEARCH_TOOL, ANSWER_TOOL]
        history: list[dict[str, Any]] = []  # the script's search_history
        for iteration in range(1, max_steps + 1):
            if iteration == max_steps:
                first = ChatRequest(messages=[*messages, Message(role="user", content=FORCE)], tools=tools,
                                    tool_choice=ANSWER_TOOL.name)
            else:
                first = ChatRequest(messages=list(messages), tools=tools, tool_choice="auto")
            response = await _complete(rec, first, ChatRequest(messages=list(messages), tools=tools))
            reply = response.message
            calls = reply.tool_calls
            if not calls:
                row = parse_text_answer(reply.text())
                return self._finish(rec, task, row, iteration, history, None)
            broken = next((c for c in calls if c.arguments and _json(c.arguments) is _INVALID), None)
            if broken is not None:
                return rec.result("error", error=(
                    f"{broken.name} was called with arguments that are not JSON ({broken.arguments[:80]!r}): the "
                    f"official {SCRIPT} raises here (it reads every call's arguments with json.loads for its "
                    "trajectory) and records the question as failed"))
            for call in calls:
                if call.name == ANSWER_TOOL.name:
                    data = _json(call.arguments)
                    if data is not _INVALID:
                        return self._answer(rec, task, data, iteration, history)
            messages.append(_echo(response))
            for call in calls:
                if call.name == SEARCH_TOOL.name:
                    data = _json(call.arguments)
                    if data is _INVALID or (isinstance(data, dict) and "query" not in data):
                        messages.append(Message(role="tool", tool_call_id=call.id, content=BAD_QUERY))
                        continue
                    query = data.get("query") if isinstance(data, dict) else None
                    if not isinstance(query, str):
                        return rec.result("error", error=(
                            f"search_documents arguments {call.arguments[:80]!r} are not an object with a string "
                            f"'query': the official {SCRIPT} raises here and records the question as failed"))
                    found = await pages.search(ctx, rec, query, load=PAGE_IMAGES.load, tool=SEARCH_TOOL.name)
                    history.append({"iteration": iteration, "query": query, "num_results": len(found.hits)})
                    messages.append(Message(role="tool", tool_call_id=call.id, content=FOUND.format(n=len(found.hits))))
                    if found.hits:
                        messages.append(Message(role="user", content=found.parts))
                elif call.name == ANSWER_TOOL.name:  # arguments that are not JSON (valid ones ended above)
                    messages.append(Message(role="tool", tool_call_id=call.id, content=ANSWER_RECORDED))
        return rec.result("limit", error=f"Maximum iterations reached ({max_steps}): the official {SCRIPT} "
                                         f"answers {LIMIT_ANSWER!r}")

    def _answer(self, rec: Recorder, task: DocQATask, data: Any, iteration: int,
                history: list[dict[str, Any]]) -> AgentResult:
        """provide_answer's arguments as the script returns them (answer_data.get(...))."""
        if not isinstance(data, dict):
            return rec.result("error", error=f"provide_answer arguments are JSON but not an object: the official "
                                             f"{SCRIPT} raises here (answer_data.get)")
        return self._finish(rec, task, {"answer": data.get("answer", []), "citations": data.get("citations", [])},
                            iteration, history, None)

    @staticmethod
    def _finish(rec: Recorder, task: DocQATask, row: dict[str, Any], iteration: int,
                history: list[dict[str, Any]], error: str | None) -> AgentResult:
        """The episode's result from the row the script returns; citations that cannot be read as
        pages are dropped (and named in the error), not the whole answer."""
        submission = script_submission(task, row.get("answer"), row.get("citations"), iteration, history, error)
        return rec.result("ok", submission)


class VllmOnMistralProtocol(VllmScriptProtocol):
    """vllm_agent.py's protocol on Mistral's chat API (no official Mistral script exists)."""

    name = MISTRAL_NAME
    source = MISTRAL_SOURCE


async def _complete(rec: Recorder, request: ChatRequest, fallback: ChatRequest) -> ChatResponse:
    """The script's call: on any failure, once more without tool_choice (and without the forcing
    message); the second failure is the episode's (a refusal the user must fix still stops the run)."""
    try:
        return await rec.complete(request)
    except (ModelError, ProviderRefused):
        return await rec.complete(fallback)


def _echo(response: ChatResponse) -> Message:
    """The assistant message as the script appends it: role, the reply's content as the server sent
    it, and each call's id, type "function", name and raw arguments. A null content goes as the
    adapter sends an empty one (null, or "" to servers that refuse null: llama.cpp and unknown
    OpenAI-compatible servers)."""
    reply = response.message
    raw = response.wire.get("content") if isinstance(response.wire, dict) else None
    if not isinstance(raw, str):
        return reply
    return reply.model_copy(update={"wire": {
        "role": "assistant", "content": raw,
        "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                       for c in reply.tool_calls]}})


_INVALID = object()


def _json(text: str) -> Any:
    """json.loads(arguments) as the script calls it, or _INVALID (an empty string among them)."""
    try:
        return json.loads(text)
    except ValueError:
        return _INVALID


def parse_text_answer(text: str) -> dict[str, Any]:
    """_parse_answer_from_text: the brace span holding "answer" as JSON (a string answer becomes a
    one-item list), else the rest of a line after "answer", else the stripped text."""
    match = _JSON_ANSWER.search(text)
    if match:
        try:
            data = json.loads(match.group())
        except ValueError:
            data = _INVALID
        if isinstance(data, dict):  # a "{...}" span that parses is an object
            answer = data.get("answer", [])
            return {"answer": [answer] if isinstance(answer, str) else answer, "citations": data.get("citations", [])}
    line = _LINE_ANSWER.search(text)
    if line:
        return {"answer": [line.group(1).strip()], "citations": []}
    return {"answer": [text.strip()], "citations": []}
