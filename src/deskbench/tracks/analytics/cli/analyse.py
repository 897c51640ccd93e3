"""`deskbench analyse task-stats TASKS...`: AIDABench's dataset statistics (§3.1.2) of analytics
tasks files (tracks/analytics/stats.py), beside the paper's; the core's `analyse` group takes it
through Track.cli_commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.cli.common import JsonOpt
from deskbench.console import out


def register(app: typer.Typer) -> None:
    """Add `analyse task-stats` (app is the holder cli/root.py adds to the `analyse` group)."""
    app.command("task-stats")(task_stats_cmd)


def task_stats_cmd(
    tasks: Annotated[list[Path], typer.Argument(metavar="TASKS...", help="analytics tasks JSONL files (e.g. the tasks/*.jsonl `deskbench fetch aida` wrote), counted together.")],
    output: Annotated[Path | None, typer.Option("--output", help="Also write the statistics as JSON here.")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Also write a PNG of the shares beside the paper's.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """analytics: category, input-format, cross-file and difficulty shares of task sets (AIDABench §3.1.2), beside the paper's."""
    from rich.table import Table

    from deskbench.errors import UserError
    from deskbench.paths import tasks_missing
    from deskbench.tracks.analytics.stats import stats_png, stats_rows, task_stats_of_files

    for path in tasks:
        if not path.is_file():
            raise tasks_missing(path) if not path.exists() else UserError(
                f"{path} is a folder; give analytics tasks JSONL files (deskbench fetch aida writes them under tasks/)")
    stats = task_stats_of_files(tasks)
    for target, data in ((output, (stats.model_dump_json(indent=2) + "\n").encode()),
                         (plot, stats_png(stats) if plot is not None else b"")):
        if target is None:
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            raise UserError(f"cannot write {target}: {exc.strerror or exc}; choose another path") from exc
    if as_json:
        print(stats.model_dump_json(indent=2))
        return
    table = Table(title=f"{stats.tasks} analytics tasks (AIDABench §3.1.2)")
    for column in ("", "this task set", "paper"):
        table.add_column(column)
    for row in stats_rows(stats):
        table.add_row(*(escape(c) for c in row))
    out.print(table)
    if stats.difficulty_uniform:
        out.print("every task has the same step count (the AIDA release has none): the difficulty split says nothing")
