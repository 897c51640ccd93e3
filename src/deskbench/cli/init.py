"""`deskbench init DIR --track docqa|analytics [--from PATH]`: a task set over one's own files
(deskbench/scaffold.py), then the command that runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.cli.common import QuietOpt
from deskbench.console import err, out


def register(app: typer.Typer) -> None:
    """Add `init`."""
    app.command("init")(init)


def init(
    directory: Annotated[Path, typer.Argument(help="A new (or empty) folder for the task set.")],
    track: Annotated[str, typer.Option("--track", help="docqa (over PDFs) | analytics (over spreadsheets).")] = "docqa",
    source: Annotated[Path | None, typer.Option("--from", help="Your PDFs (docqa) or spreadsheets (analytics): a file or a folder, searched recursively; default: the bundled demo's files.")] = None,
    workers: Annotated[int, typer.Option(help="docqa: extraction processes.")] = 2,
    quiet: QuietOpt = False,
) -> None:
    """Scaffold a small task set over your own PDFs or spreadsheets: TODO questions to edit, a
    README.txt, and the `deskbench run` command that runs it with a baseline needing no key."""
    from deskbench.cli.common import at_least_one
    from deskbench.scaffold import scaffold

    at_least_one("--workers", workers)
    made = scaffold(track, directory, source, workers=workers,
                    on_file=None if quiet else (lambda name: err.print(f"  {escape(name)}")))
    for warning in made.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    out.print(f"{made.tasks} TODO tasks over {made.files} files in {escape(str(directory))} "
              f"(edit {escape(str(directory / 'tasks.jsonl'))}; see README.txt there). Next:")
    typer.echo(made.command_line)
