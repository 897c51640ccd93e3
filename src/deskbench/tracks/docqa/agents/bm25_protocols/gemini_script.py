"""The official Gemini protocol: what github OxRML/MADQA baselines/bm25-mllm-agent/gemini_agent.py
(GeminiSearchAgent.answer_question) sends through google.generativeai 0.8.x's ChatSession,
request for request, on Gemini's native API (the `google/` provider, models/gemini_native.py).

- One tool, `search_documents`, with the script's description and schema; no system
  instruction: the script's instruction text is the start of the first user message,
  "<instruction>\\n\\nQuestion: <question>". Each later iteration sends "Please continue. If you
  have found the answer, provide the JSON response as specified."; the last one sends its prompt
  with no tools (`send_message(prompt, tools=[])`) and reads the reply's text as the answer.
- The answer channel is text: the first `{...}` span holding "answer" and then "citations"
  (the script's regex), parsed as JSON; otherwise the whole text is the answer, with no citations.
  Before the last iteration a text reply without function calls ends the episode only when it
  has citations or its first answer is longer than 10 characters; otherwise the loop goes on.
- Function calls: each `search_documents` call with a "query" runs the search (top k) and is
  answered by a function response {"result": "Found N matching pages. Images attached below."};
  a call without "query" and a call of another tool get no response. The responses, then for
  each page "\\nFile: X, Page: N" and the page image, go as ONE user turn. A text reply to that
  turn whose parsed JSON has citations ends the episode; any other reply (another function call
  included) is kept in the chat and the next iteration sends "Please continue...".
- History as the SDK keeps it: a turn goes into the chat only when its reply came back with
  finishReason STOP or MAX_TOKENS (or none). A refused request, a blocked prompt or another
  finishReason (MALFORMED_FUNCTION_CALL, SAFETY, UNEXPECTED_TOOL_CALL, ...) makes the SDK raise
  before it keeps the turn: the script moves on to the next iteration with the chat as it was
  (so a failed first iteration loses the question: the SDK's history does not keep it). The
  script's own finish-reason check never sees those replies.
- A model turn whose function calls go unanswered (a reply to the pages that calls the tool
  again, a call without "query") stays in the chat; the next request is refused by the API
  ("Please ensure that the number of function response parts is equal to the number of function
  call parts of the function call turn."), and so is every later one: the episode ends with the
  script's "Error: Unable to generate answer" after the forced iteration is refused.
- Images: the page at 200 DPI (ctx.settings.dpi) as the SDK sends a PIL image that has no file
  behind it (pdf2image's pages): lossless WebP ("image/webp"). The pixels are pdfium's here,
  poppler's there; the sizes match.

Where the script would go on with something the API cannot take or that cannot be scored, the
request shape is kept up to that point and the episode ends with an error naming why:
an empty reply (no parts, finishReason STOP) would be kept as a model turn without parts, which
the API refuses in every later request ("contents.parts must not be empty").

Checked against the script's recorded requests (tests/tracks/docqa/test_official_requests_gemini.py). Known
differences: retries are deskbench's (ResilientModel), not the SDK's REST defaults; the SDK's
user-agent and x-goog-api-client headers are not sent (the body, path, key and routing headers
are); thought summaries (only returned when asked for, which the script never does) would come
back to the script as plain text, here they are kept apart and not sent; a reply without
candidates is retried here, where the script moves on to its next iteration.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from PIL import Image
from pydantic import ValidationError

from deskbench.agents.base import AgentContext, AgentResult, Recorder, describe_problem
from deskbench.models.types import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    ModelError,
    Part,
    TextPart,
)
from deskbench.tracks.docqa.agents.bm25_protocols import script_texts
from deskbench.tracks.docqa.agents.bm25_protocols.base import (
    PageMemory,
    Pages,
    PageSearch,
    official_source,
    script_view,
)
from deskbench.tracks.docqa.agents.bm25_protocols.script_texts import (
    ANSWER_FIELDS,
    PAGE_LABEL,
    PROMPT_OPENING,
    SEARCH_TOOL,
)
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask
from deskbench.untrusted.limits import FileLimitError

SCRIPT = "gemini_agent.py"

INSTRUCTION = f"""{PROMPT_OPENING}. When you have the answer, respond with a JSON object in this exact format:
{{
  "answer": ["answer value 1", "answer value 2", ...],
  "citations": [
    {{"file": "exact_filename.pdf", "page": 1}},
    {{"file": "another_file.pdf", "page": 3}}
  ]
}}

Where:
{ANSWER_FIELDS}
  
"""
"""The script's `system_instruction` text, trailing spaces and newlines included (it is sent as the
start of the first user message, not as a system instruction)."""

CONTINUE = "Please continue. If you have found the answer, provide the JSON response as specified."
FOUND = f"{script_texts.FOUND} Images attached below."
ERROR_ANSWER = "Error: Unable to generate answer"

KEPT = frozenset({None, "FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS"})
"""Finish reasons after which the SDK keeps the turn (ChatSession._check_response)."""
RAISED = frozenset({"SAFETY", "RECITATION", "OTHER", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                    "MALFORMED_FUNCTION_CALL", "IMAGE_SAFETY", "UNEXPECTED_TOOL_CALL"})
"""Gemini's other finish reasons: the SDK raises StopCandidateException on them."""

_ANSWER_JSON = re.compile(r'\{[\s\S]*"answer"[\s\S]*"citations"[\s\S]*\}')


def parse_final_answer(text: str) -> dict[str, Any]:
    """The script's _parse_final_answer: the greedy {...} span naming "answer" then "citations",
    parsed as JSON and kept when it has both keys; otherwise the stripped text, no citations."""
    match = _ANSWER_JSON.search(text)
    if match:
        try:
            parsed = json.loads(match.group(0))
            if isinstance(parsed, dict) and "answer" in parsed and "citations" in parsed:
                return parsed
        except json.JSONDecodeError:
            pass
    return {"answer": [text.strip()], "citations": []}


def texts(message: Message) -> list[str]:
    """The reply's non-empty text parts, in order (the script reads `part.text` of each part)."""
    if isinstance(message.content, str):
        return [message.content] if message.content else []
    return [p.text for p in message.content if isinstance(p, TextPart) and p.text]


def kept(response: ChatResponse) -> bool:
    """Whether the SDK keeps this reply's turn (and returns it to the script) rather than raising."""
    reason = response.finish_reason
    if reason in KEPT:
        return True
    raised = reason in RAISED or (reason or "").startswith("PROMPT_BLOCKED") or (reason or "").isdigit()
    return not raised  # another provider's finish reason (this protocol named explicitly): a normal reply


def as_sent_back(reply: Message) -> Message:
    """The model turn as the SDK keeps it: google.generativeai 0.8.x's protos (generativelanguage
    0.6.x) have no thought fields, so thought parts would come back as plain text and signatures
    are dropped; deskbench keeps thoughts apart (never sent) and drops the signatures the same way."""
    calls = [c.model_copy(update={"signature": None}) for c in reply.tool_calls]
    return reply.model_copy(update={"tool_calls": calls, "reasoning": []})


class WebpPages(PageMemory[bytes]):
    """The page images as the SDK sends a PIL image without a file behind it
    (google/generativeai/types/content_types.py _pil_to_blob: `image.save(format="webp",
    lossless=True)`), made from deskbench's 200 DPI rendering. Encoding costs ~1 s of CPU for a
    page, so each page's WebP is remembered (by the rendered PNG's hash) for the process's life,
    bounded, thread-safe: episodes get a new protocol object each."""

    def __init__(self, max_pages: int = 64) -> None:
        super().__init__(max_pages)

    def image(self, ctx: AgentContext, doc: str, page: int) -> ImagePart:
        rendered, key = self.rendered(ctx, doc, page)
        data = self.recall(key)
        if data is None:
            with Image.open(io.BytesIO(rendered)) as opened:
                rgb = opened.convert("RGB")  # pdf2image's pages are RGB
            buffer = io.BytesIO()
            rgb.save(buffer, format="webp", lossless=True)
            data = buffer.getvalue()
            self.remember(key, data)
        return ImagePart.of(data, "image/webp", ref=f"page:{doc}#{page}@{ctx.settings.dpi}")

    def load(self, ctx: AgentContext, pages: Pages) -> list[Part]:
        """For each page "\\nFile: X, Page: N" then its image; a page that cannot be shown is left
        out whole, label included, as the script leaves out a page it cannot load."""
        parts: list[Part] = []
        for doc, page in pages:
            try:
                shown = script_view(ctx, doc, page, self.image)
            except FileLimitError:
                continue
            parts.extend([TextPart(text=PAGE_LABEL.format(file=doc, page=page)), shown])
        return parts


PAGE_IMAGES = WebpPages()


class GeminiScriptProtocol:
    name = SCRIPT
    source = official_source(SCRIPT)

    async def run(self, task: DocQATask, ctx: AgentContext, rec: Recorder, pages: PageSearch,
                  max_steps: int) -> AgentResult:
        chat: list[Message] = []  # the ChatSession's history
        history: list[dict[str, Any]] = []  # the script's search_history

        async def send(content: list[Message], tools: bool) -> ChatResponse | None:
            """chat.send_message: the history plus `content`; the turn is kept only when the SDK
            would keep it (None: the SDK raised, and the script goes on)."""
            try:
                response = await rec.complete(ChatRequest(messages=[*chat, *content],
                                                          tools=[SEARCH_TOOL] if tools else []))
            except ModelError:
                return None
            if not kept(response):
                return None
            chat.extend(content)
            chat.append(as_sent_back(response.message))
            return response

        for iteration in range(1, max_steps + 1):
            prompt = f"{INSTRUCTION}\n\nQuestion: {task.question}" if iteration == 1 else CONTINUE
            if iteration == max_steps:
                return self._last(rec, task, await send([Message(role="user", content=prompt)], tools=False),
                                  iteration, history)
            response = await send([Message(role="user", content=prompt)], tools=True)
            if response is None:
                continue
            reply = response.message
            said = texts(reply)
            if not said and not reply.tool_calls:
                return rec.result("error", error=(
                    f"an empty reply (no parts) at iteration {iteration}: the official {SCRIPT} keeps it as a model "
                    "turn without parts, which the API refuses in every later request (contents.parts must not be empty)"))
            if said and not reply.tool_calls:
                data = parse_final_answer("".join(said))
                answer = data.get("answer", [])
                citations = data.get("citations", [])
                if isinstance(answer, str):
                    answer = [answer]
                try:
                    final = bool(citations or (answer and len(answer[0]) > 10))
                except Exception:  # noqa: BLE001 -- the script's try/except around the same test
                    continue
                if final:
                    return self._finish(rec, task, answer, citations if isinstance(citations, list) else [],
                                        iteration, history)
                continue
            if not reply.tool_calls:
                continue
            responses: list[Message] = []
            shown: list[Part] = []
            for call in reply.tool_calls:
                if call.name != SEARCH_TOOL.name:
                    continue
                try:
                    args = call.parsed()
                except ValueError:
                    continue  # not an object: no 'query' in it
                if "query" not in args:
                    continue  # the script: "Malformed function call - missing query argument"
                query = args["query"]
                if not isinstance(query, str):
                    continue  # Whoosh's parser raises on it; the script logs the error, sends no response
                found = await pages.search(ctx, rec, query, load=PAGE_IMAGES.load, tool=SEARCH_TOOL.name)
                history.append({"iteration": iteration, "query": query, "num_results": len(found.hits)})
                responses.append(Message(role="tool", tool_call_id=call.id, content=FOUND.format(n=len(found.hits))))
                shown.extend(found.parts)
            if not responses:
                continue
            content = [*responses, *([Message(role="user", content=shown)] if shown else [])]
            follow = await send(content, tools=True)
            if follow is None:
                continue
            text = "".join(texts(follow.message))
            if text.strip():
                data = parse_final_answer(text)
                if data["citations"]:  # the row takes both as they are (no list check, unlike the others)
                    return self._finish(rec, task, data["answer"], data["citations"], iteration, history)
        raise AssertionError("unreachable: the last iteration returns")

    def _last(self, rec: Recorder, task: DocQATask, response: ChatResponse | None, iteration: int,
              history: list[dict[str, Any]]) -> AgentResult:
        """The forced iteration: the reply's text (the SDK's `response.text`, its text parts joined
        by newlines) read as the answer; a refused or raised call, or a reply with no text or a
        function call, is the script's error row."""
        if response is None:
            why = "the last request was refused or its reply raised in the SDK"
        elif response.message.tool_calls:
            why = "the last reply holds a function call, which the SDK's response.text cannot convert"
        elif not texts(response.message):
            why = "the last reply has no text (the SDK's response.text raises)"
        else:
            data = parse_final_answer("\n".join(texts(response.message)))
            answer = data.get("answer", [])
            citations = data.get("citations", [])
            if isinstance(answer, str):
                answer = [answer]
            elif not isinstance(answer, list):
                answer = [str(answer)] if answer else ["Unable to parse answer"]
            return self._finish(rec, task, answer, citations if isinstance(citations, list) else [], iteration, history)
        return rec.result("error", error=f"{why}: the official {SCRIPT} writes the answer {ERROR_ANSWER!r} "
                                         f"at iteration {iteration}")

    @staticmethod
    def _finish(rec: Recorder, task: DocQATask, answer: Any, citations: Any, iteration: int,
                history: list[dict[str, Any]]) -> AgentResult:
        """The episode's result from the row the script returns; citations it cannot read as pages
        are dropped (and named in the error), not the whole answer."""
        dropped: list[str] = []
        if not isinstance(citations, list):
            dropped.append(f"{json.dumps(citations, default=str)[:80]} (not a list)")
            citations = []
        try:
            submission = DocQASubmission.model_validate(
                {"id": task.id, "question": task.question, "answer": answer, "citations": citations,
                 "iterations": iteration, "steps": len(history), "search_history": history},
                context={"dropped": dropped})
        except ValidationError as exc:
            return rec.result("error", error=f"the answer cannot be read ({describe_problem(exc)}): "
                                             f"{json.dumps(answer, default=str)[:120]}")
        if dropped:
            submission.error = f"citations dropped: {'; '.join(dropped)}"
        return rec.result("ok", submission)
