"""`deskbench mcp`: a track's tools as an MCP server for an agent you run yourself (stdio, or
streamable HTTP on 127.0.0.1), every call recorded into episodes of a run directory: docqa's over
a corpus (--corpus), analytics' or deliverables' for one task of a tasks file or package folder
(--tasks, the track read from it as `run` reads it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.common import RetrieverDownloadOpt, RetrieverOpt
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `mcp`."""
    app.command("mcp")(mcp)


def mcp(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Run directory the calls are recorded into (system 'external').")],
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="docqa: corpus directory (from deskbench ingest).")] = None,
    tasks: Annotated[Path | None, typer.Option("--tasks", "-t", help="analytics tasks JSONL or deliverables package folder: serve its tools for one task.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="With --tasks: the task served (default: the first); each answer is stored as its next attempt.")] = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio | http (streamable HTTP on 127.0.0.1).")] = "stdio",
    port: Annotated[int, typer.Option("--port", help="http: the port on 127.0.0.1.")] = 8765,
    question: Annotated[str, typer.Option("--question", help="docqa: the question the agent is asked, kept with the episode.")] = "",
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="docqa: pages per search.")] = 5,
    retriever: RetrieverOpt = "bm25",
    retriever_download: RetrieverDownloadOpt = False,
    max_rounds: Annotated[int, typer.Option("--max-rounds", help="With --tasks: execute_code calls per episode; a call past it ends the episode (analytics) or is refused with a request to submit (deliverables).")] = 20,
    max_episodes: Annotated[int, typer.Option("--max-episodes", help="Episodes this server opens (each MCP session's first call opens one); past it a call is refused.")] = 1000,
    max_calls_per_second: Annotated[float, typer.Option("--max-calls-per-second", help="Tool calls a second, all clients together; a call over it is refused with a request to slow down.")] = 20.0,
) -> None:
    """Serve a track's tools over MCP: docqa's search_documents, get_page and provide_answer
    (--corpus); analytics' execute_code and provide_answer, or deliverables' read_input,
    execute_code and submit_deliverable, for one task (--tasks). Each answer ends an episode
    (stored in --out) and the next call starts another; each MCP session has its own episode.
    Over http the printed URL holds the server's secret: without it a request is refused."""
    from deskbench.requirements import MCP, check

    check("deskbench mcp", [MCP])  # the extra before anything is created
    import asyncio

    from deskbench.mcp.standalone import ServerLimits, serve_corpus, serve_tasks

    if transport not in ("stdio", "http"):
        raise UserError(f"--transport {transport!r} is not valid; use stdio or http")
    if (corpus is None) == (tasks is None):
        raise UserError("deskbench mcp serves one track: give --corpus DIR (docqa) or --tasks PATH "
                        "(an analytics tasks JSONL or a deliverables package folder)")
    if max_rounds < 1:
        raise UserError(f"--max-rounds {max_rounds} is not valid; use 1 or more")
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is not valid; use a port from 1 to 65535 (0: one the system picks)")
    if max_episodes < 1:
        raise UserError(f"--max-episodes {max_episodes} is not valid; use 1 or more")
    if not 0 < max_calls_per_second < float("inf"):  # also refuses nan
        raise UserError(f"--max-calls-per-second {max_calls_per_second:g} is not valid; use a number more than 0, e.g. 20")
    limits = ServerLimits(max_episodes=max_episodes, calls_per_second=max_calls_per_second)
    if tasks is not None:
        if not tasks.exists():
            from deskbench.paths import tasks_missing

            raise tasks_missing(tasks)
        if retriever != "bm25" or retriever_download:
            raise UserError("--retriever chooses the search over a corpus; with --tasks there is none: give --corpus "
                            "DIR or drop --retriever")
        asyncio.run(serve_tasks(tasks, out_dir, task=task, transport=transport, port=port, max_rounds=max_rounds,
                                limits=limits))
        return
    if task is not None:
        raise UserError("--task picks a task of --tasks; with --corpus give the question with --question")
    from deskbench.search.retriever_use import check_spec

    if check_spec(retriever).is_default and retriever_download:  # a typo or an unknown kind before anything starts
        raise UserError("--retriever-download fetches a --retriever's model; bm25 has none: give --retriever "
                        "KIND=MODEL or drop --retriever-download")
    assert corpus is not None
    from deskbench.paths import require_corpus

    require_corpus(corpus, "--corpus")  # before the run directory is made: a typo leaves no folder
    asyncio.run(serve_corpus(corpus, out_dir, transport=transport, port=port, question=question, top_k=top_k,
                             limits=limits, retriever=retriever, retriever_download=retriever_download))
