"""What every command module shares: the common options, the progress bars, and one progress path
for every track's run (execute_with_progress)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from deskbench.console import err
from deskbench.errors import UserError

if TYPE_CHECKING:  # rich.progress is imported when a command shows progress, not at start-up
    from rich.progress import Progress

    from deskbench.runs.runner import RunCounts
    from deskbench.runs.track import PreparedRun, RunRequest

CorpusOpt = Annotated[Path, typer.Option("--corpus", "-c", help="Corpus directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
RetrieverOpt = Annotated[str, typer.Option("--retriever", "-r", help=(
    "What the search runs on: bm25 (MADQA's Whoosh tool; the default) | KIND=MODEL (a model folder or a hub name "
    "already downloaded; `deskbench list retrievers`) | A+B fused by RRF (docs/retrievers.md)."))]
RetrieverDownloadOpt = Annotated[bool, typer.Option("--retriever-download", help=(
    "Let --retriever fetch its model from the Hugging Face hub when it is not on this machine (off: nothing is "
    "downloaded)."))]

def progress_bars(quiet: bool) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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

def at_least_one(flag: str, value: int) -> None:
    if value < 1:
        raise UserError(f"{flag} {value} is not valid; use 1 or more")


def describe(report: object) -> str:
    """A generator's report as one readable block."""
    fields = report.model_dump() if hasattr(report, "model_dump") else vars(report)
    return "\n".join(f"{k}: {v}" for k, v in fields.items())


def execute_with_progress(prep: PreparedRun, quiet: bool, request: RunRequest | None = None,
                          executor: str = "local") -> list[str]:
    """Run every system of a prepared run at once (runs/track.py execute_run), one progress bar
    each (done / errors / cost); report each system's counts; return the systems' names."""
    from deskbench.models.prices import cost_summary, format_cost
    from deskbench.runs.executors import get_executor
    from deskbench.runs.track import ready

    ready(prep)  # the runner's bookkeeping (tasks filed, identities recorded, what is done counted), once
    for warning in prep.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    for model in {id(s.model): s.model for s in prep.systems if s.model is not None}.values():
        if model.settings is not None:
            err.print(f"{escape(model.id)} settings: {escape(model.settings.describe())}")
    with progress_bars(quiet) as progress:
        bars = {s.name: progress.add_task(s.name, total=prep.per_system, current="", completed=s.already_done)
                for s in prep.systems}

        def on_episode(system: str, counts: RunCounts) -> None:
            progress.update(bars[system], advance=1,
                            current=f"errors {counts.errors}  cost {format_cost(counts.cost_usd)}")

        try:
            outcomes = get_executor(executor)(prep, request, on_episode)
        except KeyboardInterrupt:  # Ctrl-C: one line, what is stored and how to resume; exit 130 as typer's
            progress.stop()
            err.print(f"interrupted: {escape(prep.stored_line())}")
            raise typer.Exit(130) from None
    for o in outcomes:
        c = o.counts
        money = f"; {cost_summary(o.ledger.total.cost_usd)}; retries {o.ledger.retries}" if o.ledger else ""
        err.print(f"{escape(o.system)}: {c.done} episodes run ({c.errors} errors), {c.skipped} already done{money}"
                  f"{escape(c.notes(retry_hint=request is not None))}")
    stored = sum(o.counts.done + o.counts.skipped for o in outcomes)
    if prep.budget is not None and prep.budget.reached() and stored < prep.total:  # the run's limit stopped it
        err.print(escape(prep.budget.stop_line(stored, prep.total)))  # spent, done, how to go on
    return [o.system for o in outcomes]
