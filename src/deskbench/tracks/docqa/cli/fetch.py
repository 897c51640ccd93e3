"""`deskbench fetch madqa`: MADQA (Hugging Face OxRML/MADQA) onto this machine (tracks/docqa/fetch.py);
the core's `fetch` group takes it through Track.cli_commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from deskbench.cli.common import JsonOpt, QuietOpt, progress_bars
from deskbench.console import err, out

if TYPE_CHECKING:  # rich.progress and the fetch code load when the command runs
    from rich.progress import Progress, TaskID

    from deskbench.tracks.docqa.fetch import FetchSummary


def register(app: typer.Typer) -> None:
    """Add `fetch madqa` (app is the holder cli/root.py adds to the `fetch` group)."""
    app.command("madqa")(fetch_madqa_cmd)


def fetch_madqa_cmd(
    source: Annotated[Path | None, typer.Option("--from", help="A snapshot folder of the dataset, as `hf download OxRML/MADQA --repo-type dataset --local-dir DIR` (or huggingface-cli download) leaves it; without it the dataset is downloaded from the hub with your token (HF_TOKEN or `hf auth login`), after you accept its terms at https://huggingface.co/datasets/OxRML/MADQA.")] = None,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder to write: SPLIT.jsonl tasks, pdfs/ (with manifest.json), corpus/, failed_downloads.jsonl, fetch.json.")] = Path("madqa"),
    split: Annotated[list[str] | None, typer.Option("--split", metavar="NAME", help="train | dev | test (repeat; default: all three).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="A trial: the first N tasks of each split, and only the PDFs their evidence cites (the corpus is then not the whole collection).")] = None,
    workers: Annotated[int, typer.Option("--workers", help="PDF downloads at once (and PDF extraction processes, at most the CPUs).")] = 4,
    page_text: Annotated[Path | None, typer.Option("--page-text", help="The official OCR for the corpus (the Textract JSONL of baselines/utils/ocr-documents, or any shape `deskbench ingest --page-text` reads); pages of documents not fetched are skipped.")] = None,
    ocr: Annotated[str, typer.Option(help="OCR of pages without a text layer while ingesting: never | auto | always")] = "auto",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """MADQA (Hugging Face OxRML/MADQA): tasks per split, its PDFs (resumable, checksummed), a corpus.

    Exit code 1 when some PDFs could not be downloaded (listed, and written to
    failed_downloads.jsonl; the others are kept and ingested): run it again to retry them."""
    from deskbench.corpus.extract import OCR_MODES, OcrSettings
    from deskbench.errors import one_of
    from deskbench.tracks.docqa.fetch import SPLITS, FetchOptions, fetch_madqa

    mode = one_of(ocr, OCR_MODES, "--ocr")
    options = FetchOptions(out=out_dir, source=source, splits=tuple(dict.fromkeys(split or SPLITS)),
                           limit=limit, workers=workers, page_text=page_text,
                           ocr=OcrSettings(mode=mode))
    with progress_bars(quiet) as bars:
        summary = fetch_madqa(options, _Bars(bars))
    if as_json:
        print(summary.model_dump_json(indent=2))
    else:
        _print(summary)
    if summary.failed or (summary.ingest is not None and summary.ingest.files_failed):
        raise typer.Exit(1)


class _Bars:
    """One rich bar per stage (tracks/docqa/fetch.py Progress)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: TaskID | None = None

    def stage(self, name: str, total: int) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(name, total=total or None, current="")

    def advance(self, current: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, advance=1, current=escape(current))


def _print(s: FetchSummary) -> None:
    rev = f" at {s.revision[:12]}" if s.revision else ""
    out.print(f"MADQA from {escape(s.source)}{rev}")
    for split, path in s.tasks.items():
        out.print(f"  {split}: {s.task_counts[split]} tasks -> {escape(path)}")
    counts = ", ".join(f"{n} {o}" for o, n in s.downloads.items()) or "none"
    out.print(f"  PDFs: {s.documents} ({counts})" + (" [trial: only the PDFs the tasks cite]" if s.trial else ""))
    if s.ingest is not None:
        i = s.ingest
        out.print(f"  corpus {escape(s.corpus)}: {i.files_ok} documents ({i.files_new} new, {i.files_unchanged} "
                  f"unchanged), {i.pages} pages ingested now")
        for f in i.files_failed:
            out.print(f"  [red]not ingested[/red] {escape(f.file)}: {escape(f.reason)}")
    if s.page_text is not None:
        out.print(f"  page text from {escape(s.page_text.file)}: {s.page_text.pages} pages ({s.page_text.changed} "
                  f"changed)" + (f"; {s.page_text_skipped} pages of documents not fetched skipped"
                                 if s.page_text_skipped else ""))
    for doc in s.no_url[:10]:
        err.print(f"[yellow]warning:[/yellow] {escape(doc)} is cited as evidence but has no URL in documents/links")
    for d in s.failed:
        err.print(f"[red]failed[/red] {escape(d.document)} ({escape(d.url)}): {escape(d.reason)}")
    if s.failed:
        err.print(f"{len(s.failed)} of {s.documents} PDFs failed (listed in {escape(str(s.failed_file))}); "
                  "the others are kept: run the same command again to retry them")
    elif s.tasks:
        first = next(iter(s.tasks.values()))
        out.print(f"next: deskbench run --tasks {escape(first)} --corpus {escape(s.corpus)} --agent bm25-agent "
                  "--model MODEL --out RUNDIR")
