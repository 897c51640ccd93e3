"""`deskbench generate analytics`: fresh analytics tasks with exact ground truth, from a seed
(the core's `generate` group takes it through Track.cli_commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.common import at_least_one, describe
from deskbench.console import out


def register(app: typer.Typer) -> None:
    """Add `generate analytics` (app is the holder cli/root.py adds to the `generate` group)."""
    app.command("analytics")(generate_analytics_cmd)


def generate_analytics_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (inputs/, tasks.jsonl).")],
    tasks: Annotated[int, typer.Option("--num-tasks", help="Tasks.")] = 12,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
) -> None:
    """Analytics tasks (qa, visualization, file generation) over generated xlsx/csv/docx inputs."""
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    at_least_one("--num-tasks", tasks)
    out.print(describe(generate_analytics(out_dir, tasks=tasks, seed=seed)))
