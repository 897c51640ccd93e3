"""Agents that answer in one call: static RAG (one retrieval with the question), the oracle (the
gold evidence pages), and guess (no documents: MADQA's guessability baseline, Appendix E.2)."""

from __future__ import annotations

import asyncio
import re

from deskbench.agents.base import (
    AgentContext,
    AgentResult,
    Recorder,
    answer_once,
    page_parts,
    recorded,
)
from deskbench.errors import QuerySyntaxError
from deskbench.models.types import Message, Part, TextPart
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.prompts import GUESS_SYSTEM, RAG_SYSTEM
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.tasks import DocQATask

_WORD = re.compile(r"[^\W_]+")


def question_query(question: str) -> str:
    """The question as a search query: its words joined by OR (BM25 ranks pages by how many,
    and how rare, they share); operators, quotes and wildcards are not passed through."""
    words = [w for w in _WORD.findall(question) if w not in ("AND", "OR", "NOT")]
    return " OR ".join(words)


async def _answer(task: DocQATask, rec: Recorder, system: str, parts: list[Part], effort: int) -> AgentResult:
    messages = [
        Message(role="system", content=system),
        Message(role="user", content=[TextPart(text=f"Question: {task.question}"), *parts]),
    ]
    args, problem = await answer_once(rec, messages)
    if args is None:
        return rec.result("error", error=f"unparseable answer: {problem}")
    return rec.result("ok", submission_of(task, args, steps=effort))


class RagAgent:
    name = "rag"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        assert ctx.corpus is not None, "rag needs a corpus"
        query = question_query(task.question)
        try:
            hits = await asyncio.to_thread(ctx.corpus.search, query, ctx.settings.top_k, snippets=False) if query else []
        except QuerySyntaxError:
            hits = []
        pages = [(h.document, h.page) for h in hits]
        rec.add(ToolCallStep(name="search_documents", arguments={"query": query},
                             result={"pages": [list(p) for p in pages]}),
                detail={"hits": [{"file": h.document, "page": h.page, "score": h.score} for h in hits]})
        return await _answer(task, rec, RAG_SYSTEM, await page_parts(ctx, pages), effort=1)


class OracleAgent:
    """The paper's oracle setting: the minimal evidence pages, given; retrieval is not tested."""

    name = "oracle"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        assert ctx.corpus is not None, "oracle needs a corpus"
        pages = sorted({(e.document, e.page) for e in task.evidence})
        return await _answer(task, rec, RAG_SYSTEM, await page_parts(ctx, pages), effort=0)


class GuessAgent:
    name = "guess"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: _answer(task, rec, GUESS_SYSTEM, [], effort=0))
