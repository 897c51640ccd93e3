"""A small agent built outside deskbench: it speaks MCP through the official client library only
(no deskbench import), as a user's agent would. Lists the tools, searches with the question's
words, reads the top page as text, and answers with the page's last word after "is" (enough
for the operator corpus's "X is Y." pages), citing that page.

Usage: external_agent.py QUESTION (the server's URL in $DESKBENCH_MCP_URL)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys

from mcp import ClientSession
from mcp_client import streamablehttp_client  # tests/: the SDK's client under mcp 1.x and 2.x


async def main(question: str) -> None:
    async with streamablehttp_client(os.environ["DESKBENCH_MCP_URL"]) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"search_documents", "get_page", "provide_answer"} <= tools, tools
        words = " OR ".join(w for w in re.findall(r"\w+", question) if len(w) > 3)
        found = await session.call_tool("search_documents", {"query": words})
        text = found.content[0].text  # type: ignore[union-attr]
        if not text.startswith("{"):
            sys.exit(f"search_documents({words!r}): {text}")
        hits = json.loads(text)["results"]
        top = hits[0]
        page = await session.call_tool("get_page", {"file": top["file"], "page": top["page"], "view": "text"})
        text = " ".join(c.text for c in page.content if c.type == "text")  # type: ignore[union-attr]
        match = re.search(r"\bis ([\w-]+)", text.split("\n", 1)[-1])
        answer = match.group(1) if match else text.split()[-1]
        await session.call_tool("provide_answer", {"answer": [answer],
                                                   "citations": [{"file": top["file"], "page": top["page"]}]})


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("DESKBENCH_QUESTION") or sys.argv[1]))
