"""Corpus commands: ingest PDFs, search them, show a page, describe a corpus (or a run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from deskbench.cli.common import (
    CorpusOpt,
    JsonOpt,
    QuietOpt,
    RetrieverDownloadOpt,
    RetrieverOpt,
    progress_bars,
)
from deskbench.console import err, out
from deskbench.errors import UserError, one_of

if TYPE_CHECKING:  # the corpus module loads only when a command runs (the CLI starts fast)
    from deskbench.corpus.corpus import SearchHit


def register(app: typer.Typer) -> None:
    """Add `ingest`, `search`, `page`, `info`."""
    for command in (ingest, search, page, info,):
        app.command()(command)


def ingest(
    corpus: CorpusOpt,
    paths: Annotated[list[Path] | None, typer.Argument(help="PDF files or folders (searched recursively).")] = None,
    ocr: Annotated[str, typer.Option(help="never | auto (pages without a usable text layer) | always")] = "auto",
    ocr_engine: Annotated[str, typer.Option(help="auto | tesseract | rapidocr")] = "auto",
    ocr_lang: Annotated[str, typer.Option(help="tesseract language(s), e.g. eng or eng+fra")] = "eng",
    workers: Annotated[int, typer.Option(help="Extraction processes.")] = 1,
    page_text: Annotated[Path | None, typer.Option("--page-text", help="JSONL of page text to use in place of deskbench's own (document, page, text a line; the official Textract and Mistral OCR files too), e.g. the OCR the official MADQA baselines read.")] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Ingest PDFs into a corpus: page store, search index, stored copies. Re-running is cheap."""
    from deskbench.corpus.extract import OCR_MODES, OcrSettings
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
    from deskbench.corpus.page_text import apply_page_text, read_page_text

    if not paths and page_text is None:
        raise UserError("give PDF files or folders to ingest, or --page-text FILE for a corpus already ingested")
    for path in paths or []:  # a typo is one line before the corpus is made, with the PDFs nearby
        if not path.exists():
            from deskbench.paths import missing

            raise missing(path, lambda p: p.suffix.lower() == ".pdf" or (p.is_dir() and any(p.glob("*.pdf"))),
                          "PDFs", "give PDF files or folders that exist")
    mode = one_of(ocr, OCR_MODES, "--ocr")
    if ocr_engine not in ("auto", "tesseract", "rapidocr"):
        raise UserError(f"--ocr-engine {ocr_engine!r} is not valid; use auto, tesseract or rapidocr")
    if workers < 1:
        raise UserError(f"--workers {workers} is not valid; use 1 or more")
    settings = OcrSettings(mode=mode, engine=ocr_engine, lang=ocr_lang)
    supplied = read_page_text(page_text) if page_text is not None else None  # its own errors before any work
    if not paths and not (corpus / "pages.sqlite").exists():
        raise UserError(f"{corpus} is not a deskbench corpus yet; give the PDFs too: "
                        f"deskbench ingest PDFS... --corpus {corpus} --page-text {page_text}")
    c = open_or_create(corpus)
    plan = plan_ingest(c, paths or [])
    with progress_bars(quiet) as progress:
        task = progress.add_task("ingest", total=len(plan.jobs), current="")

        def on_file(doc_id: str, pages: int) -> None:
            progress.update(task, advance=1, current=f"{doc_id} ({pages} p)")

        summary = run_ingest(c, plan, settings, workers=workers, on_file=on_file)
    if supplied is not None:
        try:
            summary.page_text = apply_page_text(c, supplied)
        except UserError as exc:
            if paths and summary.files_new + summary.files_updated:
                raise UserError(f"{exc} (the PDFs are ingested: run the same command again once fixed)") from exc
            raise
    if as_json:
        out.print_json(summary.model_dump_json())
    else:
        table = Table(title=f"ingest into {corpus}", show_header=False)
        table.add_row("files ok", f"{summary.files_ok} ({summary.files_new} new, "
                      f"{summary.files_updated} updated, {summary.files_unchanged} unchanged)")
        table.add_row("files failed", str(len(summary.files_failed)))
        table.add_row("pages ingested", str(summary.pages))
        table.add_row("pages OCR'd", str(summary.pages_ocr))
        table.add_row("pages with errors", str(summary.pages_failed))
        if summary.pages_reindexed:
            table.add_row("pages re-indexed", str(summary.pages_reindexed))
        table.add_row("seconds", f"{summary.seconds:.1f}")
        if paths:
            out.print(table)
        for f in summary.files_failed:
            out.print(f"[red]failed[/red] {escape(f.file)}: {escape(f.reason)}")
        if summary.page_text is not None:
            pt = summary.page_text
            out.print(f"page text from {escape(pt.file)} (sha256 {pt.sha256[:12]}): {pt.pages} pages "
                      f"({pt.changed} changed, {pt.unchanged} unchanged; {pt.documents_reindexed} documents "
                      f"re-indexed); the corpus has {pt.corpus_pages_supplied} pages of supplied text and "
                      f"{pt.corpus_pages_own} that keep deskbench's own text")
    for w in summary.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}")
    if paths and summary.files_ok == 0:
        raise typer.Exit(2)


def search(
    query: Annotated[str, typer.Argument(help='Whoosh syntax: words, AND, OR, NOT, "phrases", wild*, file:NAME, word^2')],
    corpus: CorpusOpt,
    k: Annotated[int, typer.Option("--top-k", "-k", help="Number of pages to return.")] = 5,
    retriever: RetrieverOpt = "bm25",
    retriever_download: RetrieverDownloadOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Search the corpus page by page (BM25, Whoosh's analyzer: its stop words and single
    characters are not searchable), or with --retriever (docs/retrievers.md).

    Strict: a query Whoosh would repair or cut silently (an unbalanced quote or parenthesis, an
    operator without a term, a wildcard with no letters, stop words only) is refused with one
    line and exit 2. The agents' search tool parses the same query leniently, as MADQA's
    official Whoosh tool does."""
    from deskbench.corpus import Corpus
    from deskbench.search.retriever_use import check_spec, open_on

    if check_spec(retriever).is_default and retriever_download:
        raise UserError("--retriever-download fetches a --retriever's model; bm25 has none: give --retriever "
                        "KIND=MODEL or drop --retriever-download")
    c = Corpus.open(corpus)
    open_on(c, retriever, allow_download=retriever_download)  # progress on stderr
    hits = c.search(query, k=k, strict=True)
    if as_json:
        print(json.dumps([h.model_dump() for h in hits], ensure_ascii=False, indent=2))
        return
    _print_hits(query, hits)


def _print_hits(query: str, hits: list[SearchHit]) -> None:
    out.print(f"[bold]{escape(query)}[/bold]  ({len(hits)} pages)")
    for rank, h in enumerate(hits, 1):
        out.print(f"  {rank}. [cyan]{escape(h.document)}[/cyan] p.{h.page}  "
                  f"score {h.score:.2f}\n     {_bold(h.snippet)}")


def _bold(snippet: str) -> str:
    """Matches in bold on a terminal; elsewhere (a pipe, a file) keep the ** markers as they are."""
    if not out.is_terminal:
        return escape(snippet)
    parts = snippet.split("**")
    return "".join(f"[bold yellow]{escape(p)}[/bold yellow]" if i % 2 else escape(p)
                   for i, p in enumerate(parts))


def page(
    corpus: CorpusOpt,
    document: Annotated[str, typer.Argument(help="Document id (the PDF's file name).")],
    page_number: Annotated[int, typer.Argument(metavar="PAGE", help="1-based page number.")],
    output: Annotated[Path, typer.Option("--output", help="Image file to write.")],
    dpi: Annotated[int, typer.Option(help="Render resolution.")] = 150,
    fmt: Annotated[str, typer.Option("--format", help="png | jpeg | webp")] = "png",
    max_pixels: Annotated[int | None, typer.Option(help="Cap on width x height.")] = None,
    max_bytes: Annotated[int | None, typer.Option(help="Cap on the encoded size (Lanczos downscaling).")] = None,
) -> None:
    """Render one page to an image (cached in the corpus)."""
    from deskbench.corpus import Corpus
    from deskbench.corpus.images import FORMATS, ImageSpec

    c = Corpus.open(corpus)
    spec = ImageSpec(dpi=dpi, format=one_of(fmt, FORMATS, "--format"), max_pixels=max_pixels, max_bytes=max_bytes)
    data = c.page_image(document, page_number, spec)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(data)
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}; choose another -o path") from exc
    err.print(f"wrote {output} ({len(data):,} bytes)")


def info(
    run_dir: Annotated[Path | None, typer.Argument(metavar="RUNDIR", help="A run directory (the --out of a run): its track, tasks and, per system, the deskbench that ran it, its configuration and its episodes.")] = None,
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="Corpus directory.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """What a corpus holds (--corpus: documents, pages, OCR'd pages, failed files, index state),
    or what a run is (RUNDIR: its track, tasks, and per system its build, configuration, episodes)."""
    from deskbench.corpus import Corpus

    if (run_dir is None) == (corpus is None):
        raise UserError("give a run directory (deskbench info RUNDIR) or a corpus (deskbench info --corpus DIR), "
                        "one of the two")
    if run_dir is not None:
        _run_info(run_dir, as_json)
        return
    assert corpus is not None
    c = Corpus.open(corpus)
    docs = c.documents()
    errors = c.store.errors()
    unindexed = c.store.unindexed()
    supplied = c.store.supplied_counts()
    text_files = c.store.page_text_files()
    data = {
        "documents": len(docs),
        "pages": sum(d.page_count for d in docs),
        "pages_ocr": sum(d.pages_ocr for d in docs),
        "pages_failed": sum(d.pages_failed for d in docs),
        "pages_page_text": sum(supplied.values()),  # text from a --page-text file, not deskbench's
        "page_text_files": [{"file": f.path, "sha256": f.sha256, "pages": f.pages, "applied_at": f.applied_at}
                            for f in text_files],
        "indexed_pages": c.index.num_pages(),
        "documents_not_indexed": [d.doc_id for d in unindexed],
        "files_failed": [{"file": e.source_path, "reason": e.reason} for e in errors],
        "document_list": [
            {"document": d.doc_id, "pages": d.page_count, "pages_ocr": d.pages_ocr,
             "pages_page_text": supplied.get(d.doc_id, 0), "sha256": d.content_hash, "source": d.source_path}
            for d in docs
        ],
    }
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"corpus {corpus}")
    for col in ("document", "pages", "OCR'd") + (("supplied text",) if supplied else ()):
        table.add_column(col)
    for d in docs:
        table.add_row(escape(d.doc_id), str(d.page_count), str(d.pages_ocr),
                      *((str(supplied.get(d.doc_id, 0)),) if supplied else ()))
    out.print(table)
    out.print(f"{data['documents']} documents, {data['pages']} pages "
              f"({data['pages_ocr']} OCR'd), {data['indexed_pages']} pages indexed")
    if supplied:
        out.print(f"{data['pages_page_text']} pages read from supplied text (--page-text), "
                  f"{sum(d.page_count for d in docs) - sum(supplied.values())} keep deskbench's own text")
        for f in text_files:
            out.print(f"  {escape(f.path)} (sha256 {f.sha256[:12]}): {f.pages} pages, applied {f.applied_at}")
    if unindexed:
        out.print(f"[yellow]{len(unindexed)} documents not yet indexed: run deskbench ingest again[/yellow]")
    for e in errors:
        out.print(f"[red]failed[/red] {escape(e.source_path)}: {escape(e.reason)}")


def _run_info(run_dir: Path, as_json: bool) -> None:
    """`info RUNDIR`: what the run is over, and each system's identity (runs/identity.py)."""
    from deskbench.runs.budget import describe_recorded, recorded_limits, stored_spend
    from deskbench.runs.identity import stored_identities
    from deskbench.runs.store import RunStore

    store = RunStore(run_dir, create=False)
    try:
        identities = stored_identities(store)
        spent = stored_spend(store)  # what the run's --max-cost / --token-budget count (runs/budget.py)
        limits = recorded_limits(store)
        counts = store.episode_counts()
        tries = store.try_counts()  # earlier tries of episodes run again (--retry-errors)
        systems: dict[str, dict[str, Any]] = {
            system: {
                "episodes": sum(counts.get(system, {}).values()),
                "episodes_by_status": counts.get(system, {}),
                "earlier_tries": sum(n for (_, s, _), n in tries.items() if s == system),
                **({"first": i.first.model_dump() if i.first else None, "latest": i.latest.model_dump(),
                    "config": i.config.model_dump()} if (i := identities.get(system)) else
                   {"first": None, "latest": None, "config": None}),
            }
            for system in sorted(set(counts) | set(identities))
        }
        scorings: list[dict[str, Any]] = [
            {"id": sc.id, "created": sc.created, "track": sc.track, "deskbench": sc.deskbench,
             "settings": sc.settings.model_dump(), "label": sc.label(),
             "systems": {name: h.model_dump() for name, h in store.scoring_headlines(sc.id).items()}}
            for sc in store.scorings()]
        data = {
            "run": str(run_dir),
            "track": store.track(),
            "tasks": len(store.task_hashes()),
            "tasks_file": store.meta("tasks_file") or store.meta("packages"),
            "systems": systems,
            "scorings": scorings,
            "spent": {"cost_usd": spent.cost, "tokens": spent.tokens},
            "limits": limits,
        }
    finally:
        store.close()
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    out.print(f"run {escape(str(run_dir))}: {data['track']} track, {data['tasks']} tasks"
              + (f" (from {escape(str(data['tasks_file']))})" if data["tasks_file"] else ""))
    out.print(f"spent {escape(spent.describe())}" + (f"; limits of its latest run: {escape(describe_recorded(limits[-1]))}"
                                                     if limits else ""))
    for system, row in systems.items():
        by_status = ", ".join(f"{n} {s}" for s, n in sorted(row["episodes_by_status"].items()))
        out.print(f"[bold]{escape(system)}[/bold]: {row['episodes']} episodes" + (f" ({by_status})" if by_status else "")
                  + (f"; {row['earlier_tries']} earlier tries kept (errored, run again)" if row["earlier_tries"] else ""))
        identity = identities.get(system)
        if identity is None:
            out.print("  configuration: not recorded (run before deskbench kept run identity)")
            continue
        first = (f"first run with {identity.first.describe()}" if identity.first
                 else "first run before deskbench kept run identity")
        out.print(f"  {escape(first)}; latest {escape(identity.latest.describe())}")
        c = identity.config
        out.print(f"  agent {escape(c.agent)}" + (f", model {escape(c.model)}" if c.model else "")
                  + f": {escape(c.describe())}")
    _print_scorings(scorings)


def _print_scorings(scorings: list[dict[str, Any]]) -> None:
    """`info RUNDIR`'s scorings: each stored `score` (when, settings), a headline per system."""
    if not scorings:
        out.print("scorings: none stored (score the run with 'deskbench score RUNDIR')")
        return
    out.print(f"scorings ({len(scorings)}, the latest is what 'deskbench view' and 'export' show):")
    for sc in scorings:
        out.print(f"  {escape(sc['label'])}" + (f", deskbench {escape(sc['deskbench'])}" if sc["deskbench"] else ""))
        for system, h in sc["systems"].items():
            mean = "–" if h["mean_score"] is None else f"{h['mean_score']:.3f}"
            share = f" ({100 * h['correct'] / h['scored']:.1f}%)" if h["scored"] else ""
            out.print(f"    {escape(system)}: {h['items']} items, {h['scored']} scored, {h['correct']} correct{share}, "
                      f"mean score {mean}, {h['items'] - h['scored']} unscored")
