"""`deskbench retrieve TASKS --corpus DIR --retriever SPEC...`: retrieval alone, each retriever's
evidence recall@k and MRR over the tasks' questions (tracks/docqa/retrieval_eval.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.common import CorpusOpt, JsonOpt
from deskbench.console import err, out
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    app.command("retrieve")(retrieve_cmd)


def retrieve_cmd(
    tasks: Annotated[Path, typer.Argument(metavar="TASKS", help="docqa tasks JSONL (with gold evidence pages).")],
    corpus: CorpusOpt,
    retriever: Annotated[list[str] | None, typer.Option(
        "--retriever", "-r", help="A retriever to compare (repeat): bm25, KIND=MODEL, or A+B fused by RRF.")] = None,
    query: Annotated[str, typer.Option(
        "--query", help="question: the question as written; keywords: its content words joined by OR.")] = "question",
    output: Annotated[Path | None, typer.Option("--output", help="Also write the full report (every task's pages) as JSON.")] = None,
    download: Annotated[bool, typer.Option(
        "--retriever-download", help="Let a retriever fetch its model from the hub when it is not on disk.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Retrieval alone: each task's question searched once per retriever, scored against its gold pages."""
    from rich.table import Table

    from deskbench.corpus import Corpus
    from deskbench.paths import require_corpus
    from deskbench.tracks.docqa.retrieval_eval import evaluate, table
    from deskbench.tracks.docqa.tasks import read_tasks

    require_corpus(corpus, "--corpus")
    items = read_tasks(tasks).items
    result = evaluate(items, Corpus.open(corpus), retriever or ["bm25"], query_form=query, allow_download=download,
                      progress=None if json_out else lambda line: err.print(line))
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {output}: {exc.strerror or exc}; choose another --output path") from exc
    if json_out:
        out.print_json(result.model_dump_json(exclude={"results": {"__all__": {"tasks"}}}))
        return
    rows = table(result)
    grid = Table(*rows[0], title=f"retrieval over {result.tasks} tasks with gold pages (query: {result.query_form})")
    for row in rows[1:]:
        grid.add_row(*row)
    out.print(grid)
    for r in result.results:
        if r.no_pages * 2 > result.tasks and result.query_form == "question":
            out.print(f"{r.retriever} returned no page for {r.no_pages} of {result.tasks} questions: Whoosh syntax "
                      "needs every word of a query on a page; --query keywords joins the content words by OR")
    if result.tasks_without_evidence:
        out.print(f"{result.tasks_without_evidence} tasks without gold pages left out")
    if output is not None:
        out.print(f"wrote {output}")
