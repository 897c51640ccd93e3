"""`deskbench import-tasks FORMAT MANIFEST`: a released benchmark's tasks (AIDABench's) as
deskbench analytics tasks (tracks/analytics/aida.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.console import err, out


def register(app: typer.Typer) -> None:
    """Add `deskbench import-tasks` to `app`."""

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
