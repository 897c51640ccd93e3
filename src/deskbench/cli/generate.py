"""`deskbench generate`: fresh benchmarks with exact ground truth, from a seed (one subcommand a track)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.cli.common import QuietOpt, at_least_one, describe, progress_bars
from deskbench.console import err, out
from deskbench.errors import UserError

generate_app = typer.Typer(no_args_is_help=True, help="Fresh benchmarks with exact ground truth, from a seed.")


def register(app: typer.Typer) -> None:
    """Add the `generate` group."""
    app.add_typer(generate_app, name="generate")


@generate_app.command("docqa")
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


@generate_app.command("analytics")
def generate_analytics_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (inputs/, tasks.jsonl).")],
    tasks: Annotated[int, typer.Option("--num-tasks", help="Tasks.")] = 12,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
) -> None:
    """Analytics tasks (qa, visualization, file generation) over generated xlsx/csv/docx inputs."""
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    at_least_one("--num-tasks", tasks)
    out.print(describe(generate_analytics(out_dir, tasks=tasks, seed=seed)))


@generate_app.command("deliverables")
def generate_deliverables_cmd(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory (one package per task).")],
    tasks: Annotated[int, typer.Option("--num-tasks", help="Task packages.")] = 5,
    seed: Annotated[int, typer.Option(help="The same seed gives byte-identical output.")] = 0,
) -> None:
    """Deliverable task packages with traps, each paired with the verifier that catches it."""
    from deskbench.tracks.deliverables.generate.packages import generate_deliverables

    at_least_one("--num-tasks", tasks)
    out.print(describe(generate_deliverables(out_dir, tasks=tasks, seed=seed)))


@generate_app.command("demo")
def generate_demo_cmd(
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Where to build it (default: the bundle inside the package).")] = None,
    check: Annotated[bool, typer.Option("--check", help="Only check that a fresh build is byte-identical to the bundle.")] = False,
) -> None:
    """Rebuild the bundled demo benchmark (or check the bundle against a fresh build)."""
    from deskbench.generate.demo import build_demo, bundled_dir, check_demo

    if check:
        problems = check_demo(out_dir)
        for p in problems:
            err.print(f"[red]differs:[/red] {escape(p)}")
        if problems:
            raise typer.Exit(1)
        out.print(f"the bundled demo in {out_dir or bundled_dir()} is byte-identical to a fresh build")
        return
    target = out_dir or bundled_dir()
    sums = build_demo(target)
    out.print(f"built the demo benchmark in {target}: {len(sums)} files")
