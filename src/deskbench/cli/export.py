"""`deskbench export`: a run in another tool's format (runs/export/: a registry of formats)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.console import out


def register(app: typer.Typer) -> None:
    """Add `deskbench export`."""

    @app.command()
    def export(
        run_dir: Annotated[Path, typer.Argument(help="A run directory (the --out of 'deskbench run').")],
        output: Annotated[Path, typer.Option("--out", "-o", help="The directory to write the export into (created).")],
        fmt: Annotated[str, typer.Option("--format", help="The export format: inspect (Inspect AI eval logs, "
                                                           "one per system; needs the deskbench[inspect] extra) | madqa (a "
                                                           "docqa run as the official MADQA predictions JSONL, one per system).")] = "inspect",
        images: Annotated[bool, typer.Option("--images/--no-images", help="Put the page images the models saw into "
                                             "the export (rendered again from the corpus), or text placeholders.")] = True,
        corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="Read pages from this corpus instead of the one "
                                                    "each system recorded (a corpus that moved).")] = None,
    ) -> None:
        """Write a run's episodes in another tool's format: with --format inspect, one Inspect AI eval
        log per system (the transcript as messages and events, the task's question and gold answer, the
        item's score as 'deskbench score' gives it without a judge, the system's configuration), so
        'inspect view --log-dir DIR' opens the run. With --format madqa, one predictions file per system
        as the official MADQA baselines write it (process_dataset.py), for the official eval/evaluate.py,
        the leaderboard, or 'deskbench import'. Nothing is sent over the network."""
        from deskbench.contract.export import ExportOptions
        from deskbench.runs.export import export_run

        if corpus is not None:  # a typo is named, with the corpora nearby, whatever the run holds
            from deskbench.paths import require_corpus

            require_corpus(corpus, "--corpus")
        written = export_run(run_dir, fmt, output, ExportOptions(images=images, corpus=corpus))
        for path in written:
            out.print(escape(str(path)))
        out.print(f"{len(written)} {fmt} {'predictions file(s)' if fmt == 'madqa' else 'log(s)'} written to "
              f"{escape(str(output))}")
