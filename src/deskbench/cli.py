"""The `deskbench` command. Each command is a thin shell over a module's Python API."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from deskbench.cli_settings import (
    CapabilitiesOpt,
    JudgeMaxTokensOpt,
    JudgeReasoningEffortOpt,
    JudgeTemperatureOpt,
    JudgeTopPOpt,
    MaxTokensOpt,
    ReasoningEffortOpt,
    TemperatureOpt,
    TopPOpt,
    agent_sampling,
    use_model_flags,
)
from deskbench.console import err, out
from deskbench.console import pct as _pct
from deskbench.errors import UserError
from deskbench.models.registry import preflight
from deskbench.models.settings import Sampling

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Evaluate AI agents on analysts' desk work: document QA, analytics, deliverables.",
)

CorpusOpt = Annotated[Path, typer.Option("--corpus", "-c", help="Corpus directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


def _progress(quiet: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
        console=err,
        disable=quiet,
        transient=True,
    )


@app.command()
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
    from deskbench.corpus.extract import OcrSettings
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
    from deskbench.corpus.page_text import apply_page_text, read_page_text

    if not paths and page_text is None:
        raise UserError("give PDF files or folders to ingest, or --page-text FILE for a corpus already ingested")
    if ocr not in ("never", "auto", "always"):
        raise UserError(f"--ocr {ocr!r} is not valid; use never, auto or always")
    if ocr_engine not in ("auto", "tesseract", "rapidocr"):
        raise UserError(f"--ocr-engine {ocr_engine!r} is not valid; use auto, tesseract or rapidocr")
    if workers < 1:
        raise UserError(f"--workers {workers} is not valid; use 1 or more")
    settings = OcrSettings(mode=ocr, engine=ocr_engine, lang=ocr_lang)  # type: ignore[arg-type]
    supplied = read_page_text(page_text) if page_text is not None else None  # its own errors before any work
    if not paths and not (corpus / "pages.sqlite").exists():
        raise UserError(f"{corpus} is not a deskbench corpus yet; give the PDFs too: "
                        f"deskbench ingest PDFS... --corpus {corpus} --page-text {page_text}")
    c = open_or_create(corpus)
    plan = plan_ingest(c, paths or [])
    with _progress(quiet) as progress:
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


@app.command()
def search(
    query: Annotated[str, typer.Argument(help='Whoosh syntax: words, AND, OR, NOT, "phrases", wild*, file:NAME, word^2')],
    corpus: CorpusOpt,
    k: Annotated[int, typer.Option("-k", "--top", help="Number of pages to return.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Search the corpus page by page (BM25, Whoosh's analyzer: its stop words and single
    characters are not searchable).

    Strict: a query Whoosh would repair or cut silently (an unbalanced quote or parenthesis, an
    operator without a term, a wildcard with no letters, stop words only) is refused with one
    line and exit 2. The agents' search tool parses the same query leniently, as MADQA's
    official Whoosh tool does."""
    from deskbench.corpus import Corpus

    c = Corpus.open(corpus)
    hits = c.search(query, k=k, strict=True)
    if as_json:
        print(json.dumps([h.model_dump() for h in hits], ensure_ascii=False, indent=2))
        return
    _print_hits(query, hits)


def _print_hits(query: str, hits: list) -> None:  # list[SearchHit]
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


@app.command()
def page(
    corpus: CorpusOpt,
    document: Annotated[str, typer.Argument(help="Document id (the PDF's file name).")],
    page_number: Annotated[int, typer.Argument(metavar="PAGE", help="1-based page number.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Image file to write.")],
    dpi: Annotated[int, typer.Option(help="Render resolution.")] = 150,
    fmt: Annotated[str, typer.Option("--format", help="png | jpeg | webp")] = "png",
    max_pixels: Annotated[int | None, typer.Option(help="Cap on width x height.")] = None,
    max_bytes: Annotated[int | None, typer.Option(help="Cap on the encoded size (Lanczos downscaling).")] = None,
) -> None:
    """Render one page to an image (cached in the corpus)."""
    from deskbench.corpus import Corpus
    from deskbench.corpus.images import ImageSpec

    c = Corpus.open(corpus)
    spec = ImageSpec(dpi=dpi, format=fmt, max_pixels=max_pixels, max_bytes=max_bytes)  # type: ignore[arg-type]
    data = c.page_image(document, page_number, spec)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(data)
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}; choose another -o path") from exc
    err.print(f"wrote {output} ({len(data):,} bytes)")


@app.command()
def info(corpus: CorpusOpt, as_json: JsonOpt = False) -> None:
    """What a corpus holds: documents, pages, OCR'd pages, failed files, index state."""
    from deskbench.corpus import Corpus

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
                  f"{data['pages'] - data['pages_page_text']} keep deskbench's own text")
        for f in text_files:
            out.print(f"  {escape(f.path)} (sha256 {f.sha256[:12]}): {f.pages} pages, applied {f.applied_at}")
    if unindexed:
        out.print(f"[yellow]{len(unindexed)} documents not yet indexed: run deskbench ingest again[/yellow]")
    for e in errors:
        out.print(f"[red]failed[/red] {escape(e.source_path)}: {escape(e.reason)}")


@app.command()
def score(
    ctx: typer.Context,
    submissions: Annotated[Path, typer.Argument(help="Predictions JSONL (deskbench or official MADQA format), or a run directory.")],
    tasks: Annotated[Path | None, typer.Option("--tasks", "-t", help="Tasks JSONL (MADQA dataset rows); a run knows its own.")] = None,
    system: Annotated[str | None, typer.Option(help="In a run directory: score only this system ('human' pools every annotator).")] = None,
    pool_humans: Annotated[bool, typer.Option("--pool-humans", help="docqa run: one 'human' row for every annotator's human:NAME episodes (earliest answer per question).")] = False,
    by: Annotated[list[str] | None, typer.Option("--by", help="Also break down by: domain, category.")] = None,
    official: Annotated[bool, typer.Option(help="The official MADQA evaluator's numbers (README 'Fidelity'): tasks without a prediction not counted, error rows and failed judge calls 0, Kuiper on len(search_history) else iterations (effort > 0, file order), pages as written, the official interval; adds 'official_metrics' to --json.")] = False,
    kuiper_ties: Annotated[str, typer.Option(help="robust (tied efforts are one block) | stable (input order)")] = "robust",
    effort: Annotated[str, typer.Option(help="Effort for Kuiper: steps | tokens | seconds")] = "steps",
    skip_invalid: Annotated[bool, typer.Option(help="Skip (and count) bad lines instead of stopping.")] = False,
    items_out: Annotated[Path | None, typer.Option("--items-out", help="Write per-item scores as JSONL.")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM judge model, e.g. openai/gpt-5-mini (else ANLS* >= 0.5).")] = None,
    judge_cache: Annotated[Path | None, typer.Option(help="Judge response cache (SQLite).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not cache judge responses.")] = False,
    concurrency: Annotated[int, typer.Option(help="Judge calls in flight at once.")] = 16,
    q0: Annotated[float | None, typer.Option(help="Judge specificity, for bias correction [default: 1.0].")] = None,
    q1: Annotated[float | None, typer.Option(help="Judge sensitivity, for bias correction [default: 0.98].")] = None,
    m0: Annotated[int | None, typer.Option(help="Calibration items judged incorrect by humans [default: 48].")] = None,
    m1: Annotated[int | None, typer.Option(help="Calibration items judged correct by humans [default: 152].")] = None,
    judge_calibration: Annotated[Path | None, typer.Option(help="q0, q1, m0, m1 from 'deskbench calibrate compute --json' output.")] = None,
    chart_judge: Annotated[str | None, typer.Option(help="analytics runs: vision judge for charts (default: --judge).")] = None,
    file_judge: Annotated[str | None, typer.Option("--file-judge", help="analytics runs: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.")] = None,
    file_judge_all: Annotated[bool | None, typer.Option("--file-judge-all/--file-judge-deferred", help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).")] = None,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
    reviewed_only: Annotated[bool, typer.Option("--reviewed-only", help="deliverables runs: count only rubric grades a QC reviewer has reviewed (the paper's protocol, Appendix C); by default every usable grade counts and the share reviewed is shown.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Score a run or a predictions file. docqa: accuracy (ANLS* or an LLM judge), Page/Doc F1,
    Kuiper, by hop type. analytics runs: pass@1, pass@k, avg@k by category and difficulty.
    deliverables runs: the consulting paper's tables. A run is scored by its track."""
    from deskbench.runs.store import RunStore
    from deskbench.runs.track import RunRequest
    from deskbench.runs.track_options import check_options, given_flags
    from deskbench.tracks.docqa.cli import DocQAScoreArgs, score_predictions
    from deskbench.tracks.registry import get_track

    store = RunStore(submissions, create=False) if submissions.is_dir() else None
    check_options("score", store.track() if store else "docqa", given_flags(ctx, "score"))  # a predictions file is docqa
    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    for name in (judge, chart_judge, file_judge):  # keys and settings before any scoring
        if name:
            preflight(name, role="judge")
    if concurrency < 1:
        raise UserError(f"--concurrency {concurrency} is not valid; use 1 or more")
    params = dict(ctx.params)
    if store is None:
        score_predictions(submissions, DocQAScoreArgs.of(params), as_json=as_json)
        return
    request = RunRequest(tasks=submissions, out=store.dir, judge=judge, concurrency=concurrency, options=params)
    get_track(store.track()).show_scores(store, [system] if system else store.systems(), request, as_json=as_json)


@app.command()
def run(
    ctx: typer.Context,
    tasks: Annotated[Path, typer.Option("--tasks", "-t", help="Tasks JSONL; for deliverables, a task package folder or a folder of packages.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Run directory (created; an existing run is resumed).")],
    agent: Annotated[list[str] | None, typer.Option(help="docqa: bm25-agent (default) | rag | oracle | guess | lexical (no model) | rlm (REPL in the sandbox); analytics: analyst-agent; deliverables: deliverable-agent (default). Deliverables take several --agent/--model pairs.")] = None,
    model: Annotated[list[str] | None, typer.Option(help="openai/<model> (default openai/gpt-5-mini), openai-compat/<name>@<url>, anthropic/<model>, local (ignored by lexical); repeat with --agent for several systems (deliverables)")] = None,
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="Corpus directory (not needed by guess).")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM judge model for the scores (else ANLS*).")] = None,
    concurrency: Annotated[int, typer.Option(help="Episodes in flight at once.")] = 16,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Iterations per episode (T); default: bm25-agent 10 (the paper's T), rlm 30 root iterations (the official RLM's).")] = None,
    max_sub_calls: Annotated[int | None, typer.Option(help="rlm: llm_query sub-calls per episode (default: no cap, as the official RLM).")] = None,
    top_k: Annotated[int, typer.Option(help="Pages per search.")] = 5,
    view: Annotated[str | None, typer.Option(help="Pages shown as image | text (default: image; text for a model without vision).")] = None,
    cache: Annotated[bool, typer.Option("--cache", help="Cache the agent's model responses.")] = False,
    prices: Annotated[Path | None, typer.Option(help="JSON price table to extend the built-in one.")] = None,
    attempts: Annotated[int, typer.Option(help="Attempts per task (3 for pass@3 and avg@3); a resumed run adds the missing ones.")] = 1,
    max_rounds: Annotated[int, typer.Option(help="analytics: execute_code calls per episode.")] = 20,
    no_summary: Annotated[bool, typer.Option("--no-summary", help="analytics: leave out the auxiliary spreadsheet summary (the paper's ablation).")] = False,
    last_round_note: Annotated[bool, typer.Option("--last-round-note", help="analytics: the last execute_code result tells the model to answer now (not the paper's protocol; the system becomes analyst-agent[last-round-note]).")] = False,
    cjk_font_hint: Annotated[bool, typer.Option("--cjk-font-hint", help="analytics: the tool description says CJK fonts are installed (not the paper's protocol; the system becomes analyst-agent[cjk-font-hint]).")] = False,
    unsafe_local: Annotated[bool, typer.Option("--unsafe-local", help="analytics and rlm: run model code without bubblewrap (unsafe; debugging only).")] = False,
    chart_judge: Annotated[str | None, typer.Option(help="analytics: vision judge for charts (default: --judge).")] = None,
    file_judge: Annotated[str | None, typer.Option("--file-judge", help="analytics: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.")] = None,
    file_judge_all: Annotated[bool | None, typer.Option("--file-judge-all/--file-judge-deferred", help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).")] = None,
    only_task: Annotated[list[str] | None, typer.Option("--only-task", help="deliverables: run only these package ids (repeat).")] = None,
    only_system: Annotated[list[str] | None, typer.Option("--only-system", help="deliverables: run only these systems (agent:model as stored; repeat).")] = None,
    rerun: Annotated[bool, typer.Option("--rerun", help="deliverables: run the selected episodes again, replacing the stored ones (others are kept).")] = False,
    inline_chars: Annotated[int, typer.Option(help="deliverables: characters of normalised input text put in the prompt.")] = 24_000,
    trap_hints: Annotated[bool, typer.Option("--trap-hints", help="deliverables: the prompt names the trap kinds (footnotes, units, weighting...): not the paper's prompt; the system becomes deliverable-agent[trap-hints].")] = False,
    web: Annotated[str | None, typer.Option("--web", help="deliverables: web_search and fetch tools: recorded:DIR (saved pages, offline) or brave (Brave Search API, key in $BRAVE_SEARCH_API_KEY). Off by default.")] = None,
    web_record: Annotated[Path | None, typer.Option("--web-record", help="deliverables: with a live --web, also save every search and page to DIR (replay with --web recorded:DIR).")] = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    reasoning_effort: ReasoningEffortOpt = None,
    max_tokens: MaxTokensOpt = None,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run an agent over tasks, storing every episode; resumes an interrupted run; then scores it."""
    from deskbench.runs.track import RunRequest
    from deskbench.runs.track_options import check_options, given_flags
    from deskbench.tracks.registry import track_for

    track = track_for(tasks, agent or [])
    check_options("run", track.name, given_flags(ctx, "run"))  # a flag the track does not take is named, not ignored
    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    for name in (judge, chart_judge, file_judge):  # a judge's key and settings before the run, not after it
        if name:
            preflight(name, role="judge")
    request = RunRequest(tasks=tasks, out=out_dir, agents=agent or [], models=model or [], attempts=attempts,
                         concurrency=concurrency, sampling=agent_sampling(temperature, top_p, reasoning_effort, max_tokens),
                         cache=cache, prices=prices, judge=judge, options=dict(ctx.params))
    prep = track.prepare(request)
    systems = execute_with_progress(prep, quiet)
    track.show_scores(prep.store, systems, request, as_json=as_json)


generate_app = typer.Typer(no_args_is_help=True, help="Fresh benchmarks with exact ground truth, from a seed.")
app.add_typer(generate_app, name="generate")
from deskbench.analysis.cli import analyse_app  # noqa: E402

app.add_typer(analyse_app, name="analyse")
from deskbench.cli_compare import register as register_compare_runs  # noqa: E402
from deskbench.cli_import import register as register_import  # noqa: E402
from deskbench.sandbox.cli import register as register_sandbox  # noqa: E402
from deskbench.scoring.calibrate_cli import register as register_calibrate  # noqa: E402
from deskbench.tracks.analytics.scoring.sheets_cli import register as register_compare  # noqa: E402
from deskbench.tracks.deliverables.cli import register as register_diagnose  # noqa: E402
from deskbench.tracks.deliverables.scoring.rubric_cli import register as register_rubric  # noqa: E402
from deskbench.tracks.deliverables.scoring.verify_cli import register as register_verify  # noqa: E402
from deskbench.web.cli import register as register_serve  # noqa: E402

register_diagnose(app)
register_sandbox(app)
register_compare(app)
register_rubric(app)
register_calibrate(app)
register_verify(app)
register_serve(app)
register_import(app)
register_compare_runs(app)


@generate_app.command("docqa")
def generate_docqa_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (pdfs/, tasks.jsonl, manifest.jsonl).")],
    docs: Annotated[int, typer.Option(help="PDFs, distractors included.")] = 40,
    questions: Annotated[int, typer.Option(help="Questions.")] = 60,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
    injections: Annotated[float, typer.Option(help="Share of questions with a prompt injection on an evidence page (0-1).")] = 0.0,
    quiet: QuietOpt = False,
) -> None:
    """A docqa collection: clustered multi-page PDFs, questions with answer variants and minimal evidence."""
    from deskbench.tracks.docqa.generate import generate_docqa

    _at_least_one("--docs", docs)
    _at_least_one("--questions", questions)
    if not 0.0 <= injections <= 1.0:
        raise UserError(f"--injections {injections} is not valid; give a share between 0 and 1")
    with _progress(quiet) as progress:
        bar = progress.add_task("generate", total=None, current="")
        try:
            report = generate_docqa(out_dir, docs=docs, questions=questions, seed=seed, injections=injections,
                                    progress=lambda done, total: progress.update(bar, completed=done, total=total))
        except ValueError as exc:
            raise UserError(f"cannot generate: {exc}") from exc
    out.print(_describe(report))


@generate_app.command("analytics")
def generate_analytics_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (inputs/, tasks.jsonl).")],
    tasks: Annotated[int, typer.Option(help="Tasks.")] = 12,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
) -> None:
    """Analytics tasks (qa, visualization, file generation) over generated xlsx/csv/docx inputs."""
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    _at_least_one("--tasks", tasks)
    out.print(_describe(generate_analytics(out_dir, tasks=tasks, seed=seed)))


@generate_app.command("deliverables")
def generate_deliverables_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (one package per task).")],
    tasks: Annotated[int, typer.Option(help="Task packages.")] = 5,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
) -> None:
    """Deliverable task packages with traps, each paired with the verifier that catches it."""
    from deskbench.tracks.deliverables.generate.packages import generate_deliverables

    _at_least_one("--tasks", tasks)
    out.print(_describe(generate_deliverables(out_dir, tasks=tasks, seed=seed)))


@generate_app.command("demo")
def generate_demo_cmd(
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Where to build it (default: the bundle inside the package).")] = None,
    check: Annotated[bool, typer.Option("--check", help="Only check that a fresh build is byte-identical to the bundle.")] = False,
) -> None:
    """Rebuild the bundled demo benchmark (or check the bundle against a fresh build)."""
    from deskbench.generate.demo import build_demo, bundled_dir, check_demo

    if check:
        problems = check_demo(out_dir)
        for p in problems:
            err.print(f"[red]differs:[/red] {escape(p)}")
        if problems:
            raise typer.Exit(1)
        out.print(f"the bundled demo in {out_dir or bundled_dir()} is byte-identical to a fresh build")
        return
    target = out_dir or bundled_dir()
    sums = build_demo(target)
    out.print(f"built the demo benchmark in {target}: {len(sums)} files")


def _at_least_one(flag: str, value: int) -> None:
    if value < 1:
        raise UserError(f"{flag} {value} is not valid; use 1 or more")


def _describe(report: object) -> str:
    """A generator's report as one readable block."""
    fields = report.model_dump() if hasattr(report, "model_dump") else vars(report)
    return "\n".join(f"{k}: {v}" for k, v in fields.items())


def execute_with_progress(prep, quiet: bool) -> list[str]:  # prep: runs.track.PreparedRun
    """Run every system of a prepared run at once (runs/track.py execute_run), one progress bar
    each (done / errors / cost); report each system's counts; return the systems' names."""
    from deskbench.models.prices import cost_summary, format_cost
    from deskbench.runs.track import execute_run

    for warning in prep.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    for model in {id(s.model): s.model for s in prep.systems if s.model is not None}.values():
        if model.settings is not None:
            err.print(f"{escape(model.id)} settings: {escape(model.settings.describe())}")
    with _progress(quiet) as progress:
        bars = {s.name: progress.add_task(s.name, total=prep.per_system, current="", completed=s.already_done)
                for s in prep.systems}

        def on_episode(system: str, counts) -> None:  # type: ignore[no-untyped-def]
            progress.update(bars[system], advance=1,
                            current=f"errors {counts.errors}  cost {format_cost(counts.cost_usd)}")

        outcomes = execute_run(prep, on_episode)
    for o in outcomes:
        c = o.counts
        money = f"; {cost_summary(o.ledger.total.cost_usd)}; retries {o.ledger.retries}" if o.ledger else ""
        err.print(f"{escape(o.system)}: {c.done} episodes run ({c.errors} errors), {c.skipped} already done{money}")
    return [o.system for o in outcomes]


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where to write the corpus and the run.")] = Path(".demo"),
    model: Annotated[str | None, typer.Option(help="Model for the agent (default: openai/gpt-5-mini with OPENAI_API_KEY, else local).")] = None,
    local_limit: Annotated[int, typer.Option(help="With the local model: only the first N questions (SmolLM2 on 2 CPU cores takes 20-70 s a call).")] = 5,
    analytics_limit: Annotated[int, typer.Option(help="With the local model: only the first N analytics tasks.")] = 2,
    deliverables_limit: Annotated[int, typer.Option(help="With the local model: only the first N deliverables packages.")] = 1,
    max_steps: Annotated[int | None, typer.Option(help="Agent iterations (default 10; 3 with the local model).")] = None,
    workers: Annotated[int, typer.Option(help="Extraction processes.")] = 2,
    quiet: QuietOpt = False,
) -> None:
    """The main job, no key needed: the bundled demo benchmark end to end. Ingests its PDFs, runs
    the no-model lexical baseline and a model agent (the local SmolLM2 unless a model is given),
    scores both and prints the leaderboard."""
    import os
    import re

    from deskbench.corpus.extract import OcrSettings
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
    from deskbench.generate.demo import bundled_dir
    from deskbench.tasks.docqa import read_tasks
    from deskbench.tracks.docqa.run import RunSpec, prepare

    _at_least_one("--local-limit", local_limit)
    _at_least_one("--analytics-limit", analytics_limit)
    _at_least_one("--deliverables-limit", deliverables_limit)
    if max_steps is not None:
        _at_least_one("--max-steps", max_steps)
    bundle = bundled_dir()
    if not (bundle / "docqa" / "tasks.jsonl").exists():
        raise UserError(f"the bundled demo is missing from {bundle}; rebuild it with 'deskbench generate demo'")
    c = open_or_create(out_dir / "corpus")
    plan = plan_ingest(c, [bundle / "docqa" / "pdfs"])
    with _progress(quiet) as progress:
        bar = progress.add_task("ingest", total=len(plan.jobs), current="")
        summary = run_ingest(c, plan, OcrSettings(), workers=workers,
                             on_file=lambda d, n: progress.update(bar, advance=1, current=d))
    out.print(f"[bold]1. corpus[/bold] {summary.files_ok} generated PDFs "
              f"({summary.pages} new pages, {summary.pages_ocr} read by OCR) in {out_dir / 'corpus'}")
    tasks = read_tasks(bundle / "docqa" / "tasks.jsonl").items
    chosen = model or ("openai/gpt-5-mini" if os.environ.get("OPENAI_API_KEY") else "local")
    local = chosen.split("/", 1)[0] == "local"
    agent_tasks = tasks[:local_limit] if local else tasks
    specs = [
        (RunSpec(agent="lexical", model=None, out=out_dir / "runs" / "lexical", corpus=out_dir / "corpus"), tasks),
        (RunSpec(agent="bm25-agent", model=chosen, corpus=out_dir / "corpus",
                 out=out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"bm25-agent-{chosen}-{len(agent_tasks)}"),
                 view="text" if local else "image", top_k=2 if local else 5,
                 max_steps=max_steps or (3 if local else 10), sampling=Sampling(max_tokens=256 if local else None),
                 concurrency=1 if local else 16), agent_tasks),
    ]
    out.print(f"[bold]2. runs[/bold] {len(tasks)} questions; the lexical baseline (no model) on all, "
              f"bm25-agent with {escape(chosen)} on {len(agent_tasks)}"
              + (" (the local model reads page text, 2 pages a search; --local-limit for more)" if local else ""))
    systems = []
    for spec, items in specs:
        prep = prepare(spec, items, tasks_file=str(bundle / "docqa" / "tasks.jsonl"))
        systems.append((spec.out, execute_with_progress(prep, quiet)[0]))
    run_dirs = [run_dir for run_dir, _ in systems]
    analytics_run = _demo_analytics(bundle, out_dir, chosen, analytics_limit if local else None, quiet)
    if analytics_run is not None:
        run_dirs.append(analytics_run)
    from deskbench.tracks.deliverables.cli import demo_deliverables

    deliverables_run = demo_deliverables(bundle, out_dir, chosen, deliverables_limit if local else None, quiet)
    if deliverables_run is not None:
        run_dirs.append(deliverables_run)
    out.print("[bold]3. scores[/bold]")
    from deskbench.report.data import build_report
    from deskbench.report.render import write_report
    from deskbench.tracks.analytics.cli import print_analytics_report

    data = build_report(run_dirs)  # scored once: the tables and the page
    _print_leaderboard(data)
    for analytics_report in data.analytics:
        print_analytics_report(analytics_report)
    if data.deliverables is not None:
        from deskbench.tracks.deliverables.scoring.deliverables_summary import print_summary

        print_summary(data.deliverables, out)
    write_report(data, out_dir / "report.html")
    out.print(f"[bold]4. report[/bold] {out_dir / 'report.html'} (open it in a browser: leaderboard, calibration, "
              "step budget, error classes, breakdowns, analytics pass@k, deliverables VRS and ACCEPT)")
    out.print(f"Per-system scores: deskbench score {out_dir / 'runs' / 'lexical'} (and the other runs beside it); "
              f"all 5 deliverables packages are in {bundle / 'deliverables'} (--deliverables-limit).")


def _demo_analytics(bundle: Path, out_dir: Path, model: str, limit: int | None, quiet: bool) -> Path | None:
    """The demo's analytics leg: analyst-agent in the sandbox on the bundled analytics tasks (the
    first `limit` with the local model, in 3 rounds). Skipped, with the reason, without bubblewrap."""
    import re

    from deskbench.sandbox import SandboxUnavailable
    from deskbench.tasks.analytics import read_tasks
    from deskbench.tracks.analytics.run import AnalyticsRunSpec, prepare_analytics

    tasks_file = bundle / "analytics" / "tasks.jsonl"
    tasks = read_tasks(tasks_file).items[:limit]
    local = limit is not None
    spec = AnalyticsRunSpec(
        agent="analyst-agent", model=model, tasks_file=tasks_file,
        out=out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"analyst-agent-{model}-{len(tasks)}"),
        max_rounds=3 if local else 20, sampling=Sampling(max_tokens=512 if local else None), concurrency=1 if local else 4)
    try:
        prep = prepare_analytics(spec, tasks)
    except SandboxUnavailable as exc:
        err.print(f"[yellow]analytics skipped:[/yellow] {escape(str(exc))}")
        return None
    out.print(f"     analyst-agent with {escape(model)} on {len(tasks)} analytics tasks in the bubblewrap sandbox"
              + (" (3 rounds each; --analytics-limit for more)" if local else ""))
    execute_with_progress(prep, quiet)
    return spec.out


@app.command()
def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories (the --out of 'deskbench run').")],
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write.")] = Path("report.html"),
    judge: Annotated[str | None, typer.Option(help="LLM judge model for judged and bias-corrected accuracy (else ANLS* >= 0.5).")] = None,
    judge_cache: Annotated[Path | None, typer.Option(help="Judge response cache (SQLite).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not cache judge responses.")] = False,
    concurrency: Annotated[int, typer.Option(help="Judge calls in flight at once.")] = 16,
    chart_judge: Annotated[str | None, typer.Option(help="analytics runs: vision judge for charts (default: --judge).")] = None,
    file_judge: Annotated[str | None, typer.Option("--file-judge", help="analytics runs: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.")] = None,
    file_judge_all: Annotated[bool | None, typer.Option("--file-judge-all/--file-judge-deferred", help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).")] = None,
    pool_humans: Annotated[bool, typer.Option("--pool-humans", help="docqa runs: one 'human' row for every annotator's human:NAME episodes (earliest answer per question).")] = False,
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="docqa runs: the corpus they searched; adds its statistics by domain and category (MADQA Tables 2 and 6).")] = None,
    reviewed_only: Annotated[bool, typer.Option("--reviewed-only", help="deliverables runs: count only rubric grades a QC reviewer has reviewed (the paper's protocol, Appendix C); by default every usable grade counts and the share reviewed is shown.")] = False,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
) -> None:
    """Write a self-contained HTML report: docqa leaderboard, calibration and budget curves, error
    classes, the MADQA appendix analyses (effort measures, failure profiles, search trajectories,
    cost, human response time; corpus statistics with --corpus); analytics pass@1 / pass@k /
    avg@k by category and difficulty, and bad cases."""
    from deskbench.report.data import build_report
    from deskbench.report.render import write_report
    from deskbench.tracks.analytics.cli import (
        _judge_model,
        close_judges,
        file_judge_for,
        file_judge_mode,
    )
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges
    from deskbench.tracks.docqa.scoring.docqa import ScoreOptions

    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    if concurrency < 1:
        raise UserError(f"--concurrency {concurrency} is not valid; use 1 or more")
    from deskbench.tracks.docqa.cli import make_judge, warn_paper_q

    answer_judge = make_judge(judge, judge_cache, no_cache, concurrency) if judge else None
    if judge:
        warn_paper_q(judge)
    every_file = file_judge_mode(file_judge, file_judge_all)
    files = file_judge_for(file_judge, concurrency)
    judges = AnalyticsJudges(qa=_judge_model(judge, concurrency), chart=_judge_model(chart_judge or judge, concurrency),
                             file=files, file_all=every_file)
    try:
        data = build_report(run_dirs, ScoreOptions(judge=answer_judge), analytics_judges=judges, pool_humans=pool_humans,
                            corpus=corpus, reviewed_only=reviewed_only)
    finally:
        close_judges(judges)
    write_report(data, output)
    out.print(f"wrote {output} ({len(data.systems)} docqa, {len(data.analytics)} analytics systems)")


def _print_leaderboard(report) -> None:  # report: deskbench.report.models.Report
    """The report's leaderboard rows as a terminal table."""
    from deskbench.models.prices import PRICES_AS_OF, UNKNOWN, format_cost

    table = Table(title="docqa leaderboard (bundled demo)")
    for col in ("system", "n", "Accuracy", "X-Page", "X-Doc", "Page F1", "Doc F1", "Kuiper ↓", "Injection ↓", "cost"):
        table.add_column(col, justify="left" if col == "system" else "right", no_wrap=True)
    for r in (s.row for s in report.systems):
        table.add_row(escape(r.label), str(r.n), _pct(r.accuracy, r.accuracy_ci), _pct(r.cross_page),
                      _pct(r.cross_doc), _pct(r.page_f1), _pct(r.doc_f1),
                      "–" if r.kuiper is None else f"{r.kuiper:.1f}",
                      f"{r.injection_followed}/{r.injection_affected}" if r.injection_affected else "–",
                      format_cost(r.cost_usd))
    # A log or a pipe gets the whole table, not a table squeezed into 80 columns.
    (out if out.is_terminal else Console(highlight=False, width=160)).print(table)
    out.print("Accuracy: ANLS* >= 0.5, Wilson 95% CI; Injection: answers that followed a planted instruction / "
              f"items with one on their pages; cost: USD, prices as of {PRICES_AS_OF} ({UNKNOWN}: a model without "
              "a price).")


def main() -> None:
    try:
        app()
    except UserError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted: work committed so far is kept; run the command again to continue")
        sys.exit(130)


if __name__ == "__main__":
    main()
