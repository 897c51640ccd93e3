"""`deskbench generate deliverables`: fresh deliverables packages with their traps, from a seed
(the core's `generate` group takes it through Track.cli_commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.common import at_least_one, describe
from deskbench.console import out


def register(app: typer.Typer) -> None:
    """Add `generate deliverables` (app is the holder cli/root.py adds to the `generate` group)."""
    app.command("deliverables")(generate_deliverables_cmd)


def generate_deliverables_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (one package per task).")],
    tasks: Annotated[int, typer.Option("--num-tasks", help="Task packages.")] = 5,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
) -> None:
    """Deliverable task packages with traps, each paired with the verifier that catches it."""
    from deskbench.tracks.deliverables.generate.packages import generate_deliverables

    at_least_one("--num-tasks", tasks)
    out.print(describe(generate_deliverables(out_dir, tasks=tasks, seed=seed)))
