"""The BM25 MLLM agent: MADQA Algorithm 1 (Appendix G.1).

The model searches with `search_documents(query)` (top-k pages, shown as images or text) and
answers with `provide_answer(answer, citations)`, for at most T iterations; on the last one the
answer tool is forced. A malformed call gets one repair turn, then the episode ends as
"error: unparseable answer". Effort = number of search calls.

Searches that show page text run on the event loop while they are cheap. On a small corpus a
search and its page texts cost 0.05-0.3 ms of CPU, less than the hop to a worker thread; in a
worker, each time tantivy or SQLite lets the GIL go, the search waits for the busy event loop to
hand it back (up to the 5 ms switch interval): with 64 episodes in flight (bench_runtime), worker
searches of 0.1-0.3 ms CPU took 2-4 ms on average and up to 40 ms. A corpus whose searches cost
more (a phrase query over 18,000 pages: ~2 ms) gets them in a worker thread, where tantivy runs
the query without the GIL; pages shown as images always load there (a page may need rendering).
"""

from __future__ import annotations

import asyncio
import json
import time

from pydantic import ValidationError

from deskbench.agents.base import (
    AgentContext,
    AgentResult,
    AnswerArgs,
    Recorder,
    describe_problem,
    load_page_parts,
    recorded,
    submission_of,
)
from deskbench.corpus.corpus import SearchHit
from deskbench.errors import QuerySyntaxError
from deskbench.models.types import ChatRequest, Message, Part, TextPart, ToolCall, ToolSpec
from deskbench.tasks.docqa import DocQATask
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.prompts import BM25_SYSTEM, SEARCH_DESCRIPTION

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


MAX_STEPS = 10
"""T, the paper's default (Appendix G.1: T = 10, k = 5), when the run gives no --max-steps."""

INLINE_SEARCH_SECONDS = 0.001
"""Text-view searches run on the event loop while they cost less CPU than this (moving average)."""


class Bm25Agent:
    name = "bm25-agent"

    def __init__(self) -> None:
        self._search_cpu = 0.0  # CPU seconds a search costs, a moving average over this agent's searches

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        assert ctx.corpus is not None, "bm25-agent needs a corpus"
        messages = [Message(role="system", content=BM25_SYSTEM), Message(role="user", content=task.question)]
        queries: list[str] = []
        repairs_left = 1
        max_steps = ctx.settings.max_steps or MAX_STEPS
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
                answer, problem, follow_up = await self._handle(calls, ctx, rec, queries)
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
        self, calls: list[ToolCall], ctx: AgentContext, rec: Recorder, queries: list[str]
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
            if ctx.settings.view == "text" and self._search_cpu < INLINE_SEARCH_SECONDS:
                result_text, hits, parts = self._timed_search(ctx, query)
            else:
                result_text, hits, parts = await asyncio.to_thread(self._timed_search, ctx, query)
            pages = [(h.document, h.page) for h in hits]
            rec.add(ToolCallStep(name=SEARCH_TOOL.name, arguments={"query": query},
                                 result={"pages": [list(p) for p in pages]}),
                    detail={"hits": [{"file": h.document, "page": h.page, "score": h.score} for h in hits]})
            follow_up.append(Message(role="tool", tool_call_id=call.id, content=result_text))
            if pages:
                images.append(Message(role="user", content=[TextPart(text=f"Results for: {query}"), *parts]))
        return None, problem, follow_up + images

    def _timed_search(self, ctx: AgentContext, query: str) -> tuple[str, list[SearchHit], list[Part]]:
        started = time.thread_time()
        try:
            return self._search(ctx, query)
        finally:  # from any thread: a lost update of the average does no harm
            self._search_cpu += (time.thread_time() - started - self._search_cpu) / 4

    @staticmethod
    def _search(ctx: AgentContext, query: str) -> tuple[str, list[SearchHit], list[Part]]:
        """One search: the text the model reads, the hits (with their scores), the pages; blocking."""
        assert ctx.corpus is not None
        try:  # parsed as MADQA's Whoosh tool parses it: a malformed query is repaired, not refused
            hits = ctx.corpus.search(query, ctx.settings.top_k, snippets=False)
        except QuerySyntaxError as exc:  # only a strict search raises; kept so a message would reach the agent
            return f"query error: {exc}", [], []
        if not hits:
            return "no results; try different terms (synonyms, abbreviations, rephrasing)", [], []
        pages = [(h.document, h.page) for h in hits]
        parts = load_page_parts(ctx, pages)
        return json.dumps({"results": [{"file": d, "page": p} for d, p in pages]}), hits, parts
