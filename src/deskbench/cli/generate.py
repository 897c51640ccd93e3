"""`deskbench generate`: fresh benchmarks with exact ground truth, from a seed: one subcommand a
track (each track adds its own through Track.cli_commands; cli/root.py builds them into this
group) and `demo`, the bundled demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from deskbench.console import err, out

generate_app = typer.Typer(no_args_is_help=True, help="Fresh benchmarks with exact ground truth, from a seed.")


def register(app: typer.Typer) -> None:
    """Add the `generate` group."""
    app.add_typer(generate_app, name="generate")


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
