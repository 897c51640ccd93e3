"""`deskbench generate docqa`: a fresh docqa collection with exact ground truth, from a seed
(the core's `generate` group takes it through Track.cli_commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.common import QuietOpt, at_least_one, describe, progress_bars
from deskbench.console import out
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `generate docqa` (app is the holder cli/root.py adds to the `generate` group)."""
    app.command("docqa")(generate_docqa_cmd)


def generate_docqa_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (pdfs/, tasks.jsonl, manifest.jsonl).")],
    docs: Annotated[int, typer.Option("--num-docs", help="PDFs, distractors included.")] = 40,
    questions: Annotated[int, typer.Option("--num-questions", help="Questions.")] = 60,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
    injections: Annotated[float, typer.Option(help="Share of questions with a prompt injection on an evidence page (0-1).")] = 0.0,
    quiet: QuietOpt = False,
) -> None:
    """A docqa collection: clustered multi-page PDFs, questions with answer variants and minimal evidence."""
    from deskbench.tracks.docqa.generate import generate_docqa

    at_least_one("--num-docs", docs)
    at_least_one("--num-questions", questions)
    if not 0.0 <= injections <= 1.0:
        raise UserError(f"--injections {injections} is not valid; give a share between 0 and 1")
    with progress_bars(quiet) as progress:
        bar = progress.add_task("generate", total=None, current="")
        try:
            report = generate_docqa(out_dir, docs=docs, questions=questions, seed=seed, injections=injections,
                                    progress=lambda done, total: progress.update(bar, completed=done, total=total))
        except ValueError as exc:
            raise UserError(f"cannot generate: {exc}") from exc
    out.print(describe(report))
