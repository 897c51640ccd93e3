"""The paper's protocol: MADQA Algorithm 1 (Appendix G.1) with the Prompt 5 system prompt.

The model searches with `search_documents(query)` (top-k pages, shown as images or text) and
answers with `provide_answer(answer, citations)`, for at most T iterations; on the last one the
answer tool is forced. A malformed call gets one repair turn, then the episode ends as
"error: unparseable answer". Every provider gets the same two tools (the official scripts differ
per provider: see the other modules of this package). Effort = number of search calls.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from deskbench.agents.base import (
    AgentContext,
    AgentResult,
    AnswerArgs,
    Recorder,
    describe_problem,
)
from deskbench.models.types import ChatRequest, Message, TextPart, ToolCall, ToolSpec
from deskbench.tracks.docqa.agents.bm25_protocols.base import Found, PageSearch
from deskbench.tracks.docqa.agents.prompts import BM25_SYSTEM, SEARCH_DESCRIPTION
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.tasks import DocQATask

SEARCH_TOOL = ToolSpec(
    name="search_documents",
    description=SEARCH_DESCRIPTION,
    parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
ANSWER_TOOL = ToolSpec(
    name="provide_answer",
    description="Provide the final answer with citations of the pages it comes from.",
    parameters={
        "type": "object",
        "properties": {
            "answer": {"type": "array", "items": {"type": "string"}},
            "citations": {
                "type": "array",
                "items": {"type": "object", "properties": {"file": {"type": "string"}, "page": {"type": "integer"}},
                          "required": ["file", "page"]},
            },
        },
        "required": ["answer", "citations"],
    },
)


class PaperProtocol:
    name = "paper"
    source = "MADQA paper, Algorithm 1 and Prompt 5 (Appendix G.1), one loop for every provider"

    async def run(self, task: DocQATask, ctx: AgentContext, rec: Recorder, pages: PageSearch,
                  max_steps: int) -> AgentResult:
        messages = [Message(role="system", content=BM25_SYSTEM), Message(role="user", content=task.question)]
        queries: list[str] = []
        repairs_left = 1
        for step in range(1, max_steps + 1):
            last = step == max_steps
            request = ChatRequest(
                messages=messages,
                tools=[ANSWER_TOOL] if last else [SEARCH_TOOL, ANSWER_TOOL],
                tool_choice=ANSWER_TOOL.name if last else "auto",
            )
            response = await rec.complete(request)
            messages.append(response.message)
            calls = response.message.tool_calls
            if not calls:
                problem = "no tool call in the reply"
            else:
                answer, problem, follow_up = await self._handle(calls, ctx, rec, pages, queries)
                if answer is not None:
                    return rec.result("ok", submission_of(task, answer, steps=len(queries),
                                                          search_history=queries, iterations=step))
                messages.extend(follow_up)
                if not problem:
                    continue
            if repairs_left == 0:
                return rec.result("error", error=f"unparseable answer: {problem}")
            repairs_left -= 1
            messages.append(Message(role="user", content=(
                f"That could not be used ({problem}). Call search_documents with a query, or provide_answer "
                'with {"answer": [...], "citations": [{"file": ..., "page": ...}]}.')))
        return rec.result("limit", error=f"no answer after {max_steps} iterations")

    async def _handle(
        self, calls: list[ToolCall], ctx: AgentContext, rec: Recorder, pages: PageSearch, queries: list[str]
    ) -> tuple[AnswerArgs | None, str, list[Message]]:
        """Run the tool calls of one reply: (the answer if given, a problem if any, new messages)."""
        follow_up: list[Message] = []
        images: list[Message] = []
        problem = ""
        for call in calls:
            try:
                args = call.parsed()
                if call.name == ANSWER_TOOL.name:
                    return AnswerArgs.model_validate(args), "", follow_up
                if call.name != SEARCH_TOOL.name:
                    raise ValueError(f"unknown tool {call.name!r}")
                query = args.get("query")
                if not isinstance(query, str) or not query.strip():
                    raise ValueError("search_documents needs a non-empty 'query' string")
            except (ValueError, ValidationError) as exc:
                problem = f"{call.name}: {describe_problem(exc)}"
                follow_up.append(Message(role="tool", tool_call_id=call.id, content=f"error: {problem}"))
                continue
            queries.append(query)
            found = await pages.search(ctx, rec, query, tool=SEARCH_TOOL.name)
            follow_up.append(Message(role="tool", tool_call_id=call.id, content=result_text(found)))
            if found.hits:
                images.append(Message(role="user", content=[TextPart(text=f"Results for: {query}"), *found.parts]))
        return None, problem, follow_up + images


def result_text(found: Found) -> str:
    """What the search tool returns to the model in the paper's loop."""
    if found.error is not None:
        return f"query error: {found.error}"
    if not found.hits:
        return "no results; try different terms (synonyms, abbreviations, rephrasing)"
    return json.dumps({"results": [{"file": d, "page": p} for d, p in found.pages]})
