"""`deskbench import`: a predictions file as a system of a run (runs/imported.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.console import err, out


def register(app: typer.Typer) -> None:
    """Add `deskbench import` and `deskbench import-tasks` to `app`."""

    @app.command("import-tasks")
    def import_tasks_cmd(
        fmt: Annotated[str, typer.Argument(help="The released benchmark's format: aida (AIDABench, HF MichaelYang-lyx/AIDA).")],
        manifest: Annotated[Path, typer.Argument(help="Its task manifest, e.g. QA_en/QA_en.jsonl (input/ and reference/ beside it).")],
        out_file: Annotated[Path, typer.Option("--output", help="deskbench tasks JSONL to write (input paths relative to its folder).")],
        difficulty_steps: Annotated[int | None, typer.Option(help="Steps for rows without a step count (AIDA has none): every such task gets N.")] = None,
    ) -> None:
        """Convert a released benchmark's tasks into deskbench tasks (what cannot be converted is listed, not guessed)."""
        from deskbench.errors import UserError
        from deskbench.tracks.analytics.aida import TASK_IMPORTERS

        importer = TASK_IMPORTERS.get(fmt)
        if importer is None:
            raise UserError(f"unknown task format {fmt!r}; choose one of: {', '.join(TASK_IMPORTERS)}")
        result = importer(manifest, out_file, difficulty_steps=difficulty_steps)
        out.print(f"wrote {len(result.tasks)} tasks to {escape(str(out_file))}")
        for reason, ids in result.skipped.items():
            err.print(f"[yellow]skipped {len(ids)}[/yellow] ({escape(reason)}): {escape(', '.join(ids[:10]))}"
                      + (" ..." if len(ids) > 10 else ""))

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
        from deskbench.runs.imported import import_predictions

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
