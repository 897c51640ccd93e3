"""`deskbench mcp`: docqa's tools as an MCP server for an agent you run yourself (stdio, or
streamable HTTP on 127.0.0.1), every call recorded into episodes of a run directory."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `mcp`."""
    app.command("mcp")(mcp)


def mcp(
    corpus: Annotated[Path, typer.Option("--corpus", "-c", help="Corpus directory (from deskbench ingest).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Run directory the calls are recorded into (system 'external').")],
    transport: Annotated[str, typer.Option(help="stdio | http (streamable HTTP on 127.0.0.1).")] = "stdio",
    port: Annotated[int, typer.Option(help="http: the port on 127.0.0.1.")] = 8765,
    question: Annotated[str, typer.Option(help="The question the agent is asked, kept with the episode.")] = "",
    top_k: Annotated[int, typer.Option(help="Pages per search.")] = 5,
) -> None:
    """Serve search_documents, get_page and provide_answer over MCP; each provide_answer ends an
    episode (stored in --out) and the next call starts another."""
    from deskbench.mcp.standalone import serve

    if transport not in ("stdio", "http"):
        raise UserError(f"--transport {transport!r} is not valid; use stdio or http")
    asyncio.run(serve(corpus, out_dir, transport=transport, port=port, question=question, top_k=top_k))
