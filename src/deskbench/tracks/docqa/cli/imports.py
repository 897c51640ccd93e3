"""`deskbench import`: a predictions file (MADQA's) as a system of a docqa run (tracks/docqa/imported.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.console import err, out


def register(app: typer.Typer) -> None:
    """Add `deskbench import` to `app`."""

    @app.command("import")
    def import_cmd(
        predictions: Annotated[Path, typer.Argument(help="Predictions JSONL (the official MADQA agents' output, a third party's, or deskbench's format).")],
        tasks: Annotated[Path, typer.Option("--tasks", "-t", help="Tasks JSONL the predictions answer (MADQA dataset rows).")],
        system: Annotated[str, typer.Option(help="Name of the system in the run, e.g. bm25-gpt5-official.")],
        out_dir: Annotated[Path, typer.Option("--out", "-o", help="Run directory (created, or a run to add the system to).")],
        skip_invalid: Annotated[bool, typer.Option(help="Skip (and count) bad lines instead of stopping.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")] = False,
    ) -> None:
        """Make a run from a predictions file: score, report and analyse then read it like a run."""
        from deskbench.tracks.docqa.imported import import_predictions

        summary, warnings = import_predictions(predictions, tasks, system, out_dir, skip_invalid=skip_invalid)
        for w in warnings:
            err.print(f"[yellow]warning:[/yellow] {escape(w)}")
        if as_json:
            print(summary.model_dump_json(indent=2))
            return
        r = summary.record
        if summary.new_episodes == 0 and r.episodes:
            out.print(f"{escape(system)} was already imported into {escape(str(out_dir))} from this file "
                      f"(sha256 {r.sha256[:12]}): nothing to do")
            return
        out.print(f"imported {escape(str(predictions))} into {escape(str(out_dir))} as {escape(system)}: "
                  f"{r.rows} predictions, {r.episodes} episodes ({r.errors} error rows), {len(r.unmatched)} "
                  f"matching no task, {r.missing} tasks without a prediction (scored as missing); "
                  f"next: deskbench score {escape(str(out_dir))}")
