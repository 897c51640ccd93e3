"""One episode's tools: search_documents, get_page and provide_answer over a corpus, each call
recorded as the built-in agents record it (a ToolCallStep through the Recorder, so the
trajectory and the transcript's tool events are the same as bm25-agent's).

Kept apart from the MCP wiring (server.py) so the tools are plain async methods: the server
exposes them, `deskbench run --agent external` reads the episode's result from them.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any, cast

from pydantic import ValidationError

from deskbench.agents.base import (
    VIEWS,
    AgentContext,
    AgentResult,
    AnswerArgs,
    EpisodeStatus,
    Recorder,
    describe_problem,
    load_page_parts,
)
from deskbench.corpus.corpus import SearchHit
from deskbench.errors import QuerySyntaxError, UserError, is_one_of, spoken_list
from deskbench.models.types import ChatModel, Part
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.tasks import DocQATask

SEARCH_DESCRIPTION = ("Search the document collection (BM25 over page text). Returns the top pages as "
                      "{file, page, score, snippet}; read a page with get_page.")
GET_PAGE_DESCRIPTION = "One page of a document: as a PNG image (view='image', the default) or as its text (view='text')."
ANSWER_DESCRIPTION = ("Provide the final answer (a list of strings) with citations of the pages it comes from, "
                      "each {file, page}. Ends the episode.")


class ToolError(ValueError):
    """A call the agent got wrong: the message goes back to it as the tool's error."""


class DocqaSession:
    """The tools of one docqa episode and what they recorded. `answered` is set by the first
    valid provide_answer; later calls are refused (the episode is over)."""

    def __init__(self, ctx: AgentContext, task: DocQATask) -> None:
        if ctx.corpus is None:
            raise UserError("the MCP tools search documents: give --corpus DIR (from deskbench ingest)")
        self.ctx = ctx
        self.task = task
        # No model is called here (the agent's own model is out of sight): the Recorder only keeps
        # the trajectory and the transcript, and never reaches complete().
        self.rec = Recorder(cast(ChatModel, None))
        self.queries: list[str] = []
        self.tool_calls = 0
        self.answer: AnswerArgs | None = None
        self.answered = asyncio.Event()

    def _open(self) -> None:
        if self.answer is not None:
            raise ToolError("the answer was already given: this episode is over")

    async def search_documents(self, query: str) -> str:
        self._open()
        if not query.strip():
            raise ToolError("search_documents needs a non-empty 'query' string")
        started = time.monotonic()
        hits, problem = await asyncio.to_thread(self._search, query)
        self.queries.append(query)
        self.tool_calls += 1
        pages = [(h.document, h.page) for h in hits]
        self.rec.add(ToolCallStep(name="search_documents", arguments={"query": query},
                                  result={"pages": [list(p) for p in pages]},
                                  seconds=round(time.monotonic() - started, 4)),
                     detail={"hits": [{"file": h.document, "page": h.page, "score": h.score} for h in hits]})
        if problem:
            return problem
        if not hits:
            return "no results; try different terms (synonyms, abbreviations, rephrasing)"
        return json.dumps({"results": [{"file": h.document, "page": h.page, "score": round(h.score, 4),
                                        "snippet": h.snippet} for h in hits]})

    def _search(self, query: str) -> tuple[list[SearchHit], str]:
        assert self.ctx.corpus is not None
        try:  # the corpus's own search, as bm25-agent calls it (a malformed query is repaired)
            return self.ctx.corpus.search(query, self.ctx.settings.top_k), ""
        except QuerySyntaxError as exc:
            return [], f"query error: {exc}"

    async def get_page(self, file: str, page: int, view: str = "image") -> list[Part]:
        """The page as the built-in agents show it to a model (load_page_parts): a label, then
        the image or the text."""
        self._open()
        if not is_one_of(view, VIEWS):
            raise ToolError(f"view {view!r} is not valid; use {spoken_list(VIEWS)}")
        started = time.monotonic()
        ctx = AgentContext(model=None, corpus=self.ctx.corpus, settings=replace(self.ctx.settings, view=view))
        try:
            parts = await asyncio.to_thread(load_page_parts, ctx, [(file, page)])
        except (UserError, KeyError, IndexError, ValueError) as exc:
            raise ToolError(f"no page {page} of {file!r}: {describe_problem(exc)}") from exc
        self.tool_calls += 1
        self.rec.add(ToolCallStep(name="get_page", arguments={"file": file, "page": page, "view": view},
                                  result={"pages": [[file, page]]}, seconds=round(time.monotonic() - started, 4)))
        return parts

    async def provide_answer(self, answer: list[str], citations: list[dict[str, Any]]) -> str:
        self._open()
        try:
            args = AnswerArgs.model_validate({"answer": answer, "citations": citations})
        except ValidationError as exc:
            raise ToolError(f"provide_answer: {describe_problem(exc)}") from exc
        self.rec.add(ToolCallStep(name="provide_answer", arguments={"answer": args.answer, "citations": [
            {"file": c.document, "page": c.page} for c in args.citations]}, result={"ok": True}))
        self.answer = args
        self.answered.set()
        return "answer recorded"

    def result(self, status: EpisodeStatus = "ok", error: str | None = None) -> AgentResult:
        """The episode as the runner stores it: the answer with effort = tool calls, or the
        trajectory so far with why there is no answer."""
        if self.answer is None:
            return self.rec.result("error" if status == "ok" else status,
                                   error=error or "the agent gave no provide_answer")
        submission = submission_of(self.task, self.answer, steps=self.tool_calls, search_history=self.queries)
        return self.rec.result("ok", submission)

