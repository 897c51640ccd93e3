"""docqa's three tools over MCP: search_documents, get_page (image or text) and provide_answer,
each going to the source's current DocqaSession (mcp_session.py). Annotations are resolved from
this module's globals (FastMCP reads them for the schema), so the types are imported here.

`deskbench mcp --corpus DIR` (Track.mcp_tools: `DocqaMcpTools`) serves them outside a run: the
episodes are questions of the user's (task ids mcp-1, mcp-2, ...; with no gold answer they are
kept, not scored)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from mcp.types import ContentBlock, ImageContent, TextContent
from pydantic import BaseModel, Field

from deskbench.contract.mcp import McpRequest, McpTools
from deskbench.mcp.server import McpTool, SessionSource
from deskbench.models.types import ImagePart, TextPart
from deskbench.tracks.docqa.mcp_session import (
    ANSWER_DESCRIPTION,
    GET_PAGE_DESCRIPTION,
    SEARCH_DESCRIPTION,
    DocqaSession,
)

if TYPE_CHECKING:
    from deskbench.runs.store import RunStore

SERVER_NAME = "deskbench-docqa"
NO_GOLD = "(no gold answer: served by deskbench mcp)"


class CitationArg(BaseModel):
    """A cited page, as provide_answer takes it."""

    file: str = Field(description="the document's id, as search_documents returns it")
    page: int = Field(description="the page number, from 1")


def docqa_tools(source: SessionSource[DocqaSession]) -> list[McpTool]:
    async def search_documents(query: str) -> str:
        return await source.current().search_documents(query)

    async def get_page(file: str, page: int, view: Literal["image", "text"] = "image") -> list[ContentBlock]:
        parts = await source.current().get_page(file, page, view)
        blocks: list[ContentBlock] = []
        for part in parts:
            if isinstance(part, TextPart):
                blocks.append(TextContent(type="text", text=part.text))
            elif isinstance(part, ImagePart):
                # by its wire name: the field is mimeType in the SDK 1.x, mime_type (alias mimeType) in 2.x
                blocks.append(ImageContent.model_validate({"type": "image", "data": part.data_b64, "mimeType": part.mime}))
        return blocks

    async def provide_answer(answer: list[str], citations: list[CitationArg]) -> str:
        session = source.current()
        reply = await session.provide_answer(answer, [c.model_dump() for c in citations])
        await source.answered(session)
        return reply

    return [McpTool(search_documents, SEARCH_DESCRIPTION), McpTool(get_page, GET_PAGE_DESCRIPTION),
            McpTool(provide_answer, ANSWER_DESCRIPTION)]


class DocqaQuestions:
    """docqa over a corpus: each episode a question of the user's, stored as task mcp-N."""

    def __init__(self, corpus: Path, store: RunStore, question: str, top_k: int, retriever: str = "bm25",
                 retriever_download: bool = False) -> None:
        from deskbench.agents.base import AgentContext, AgentSettings
        from deskbench.corpus import Corpus
        from deskbench.search.retriever_use import open_on

        opened = Corpus.open(corpus)
        open_on(opened, retriever, allow_download=retriever_download)  # search_documents runs on it
        self.ctx = AgentContext(model=None, corpus=opened, settings=AgentSettings(top_k=top_k))
        self.store, self.question, self.count = store, question, 0
        self.server_name, self.instructions = SERVER_NAME, question or None

    def tools(self, source: SessionSource[Any]) -> list[McpTool]:
        return docqa_tools(source)

    def next(self) -> tuple[str, int, Any]:
        from deskbench.tracks.docqa.tasks import DocQATask

        self.count += 1
        task = DocQATask(id=f"mcp-{self.count}", question=self.question, answer_variants=[[NO_GOLD]])
        self.store.save_tasks([task])
        return str(task.id), 0, DocqaSession(self.ctx, task)


class DocqaMcpTools(McpTools):
    """`deskbench mcp --corpus DIR`: docqa's tools over a corpus, a question of the user's each episode."""

    serves_corpus: ClassVar[bool] = True

    def corpus(self, request: McpRequest) -> DocqaQuestions:
        return DocqaQuestions(request.source, request.store, request.question, request.top_k, request.retriever,
                              request.retriever_download)
