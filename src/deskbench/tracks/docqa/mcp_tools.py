"""docqa's three tools over MCP: search_documents, get_page (image or text) and provide_answer,
each going to the source's current DocqaSession (session.py). Annotations are resolved from
this module's globals (FastMCP reads them for the schema), so the types are imported here."""

from __future__ import annotations

from typing import Literal

from mcp.types import ContentBlock, ImageContent, TextContent
from pydantic import BaseModel, Field

from deskbench.mcp.server import McpTool, SessionSource
from deskbench.mcp.session import (
    ANSWER_DESCRIPTION,
    GET_PAGE_DESCRIPTION,
    SEARCH_DESCRIPTION,
    DocqaSession,
)
from deskbench.models.types import ImagePart, TextPart

SERVER_NAME = "deskbench-docqa"


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
                blocks.append(ImageContent(type="image", data=part.data_b64, mimeType=part.mime))
        return blocks

    async def provide_answer(answer: list[str], citations: list[CitationArg]) -> str:
        session = source.current()
        reply = await session.provide_answer(answer, [c.model_dump() for c in citations])
        await source.answered(session)
        return reply

    return [McpTool(search_documents, SEARCH_DESCRIPTION), McpTool(get_page, GET_PAGE_DESCRIPTION),
            McpTool(provide_answer, ANSWER_DESCRIPTION)]
