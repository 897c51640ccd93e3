"""`deskbench fetch aida`: AIDABench's release (Hugging Face MichaelYang-lyx/AIDA) onto this machine as
analytics tasks (tracks/analytics/fetch.py); the core's `fetch` group takes it through Track.cli_commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from deskbench.cli.common import JsonOpt, QuietOpt
from deskbench.console import err, out

if TYPE_CHECKING:
    from deskbench.tracks.analytics.fetch import AidaFetchSummary


def register(app: typer.Typer) -> None:
    """Add `fetch aida` (app is the holder cli/root.py adds to the `fetch` group)."""
    app.command("aida")(fetch_aida_cmd)


def fetch_aida_cmd(
    source: Annotated[Path | None, typer.Option("--from", help="A snapshot folder of the dataset, as `hf download MichaelYang-lyx/AIDA --repo-type dataset --local-dir DIR` leaves it; without it the dataset is downloaded from the hub (your token, HF_TOKEN or `hf auth login`, is used when there is one).")] = None,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder to write: tasks/SPLIT.jsonl (one per manifest), snapshot/ (from the hub), fetch.json.")] = Path("aida"),
    split: Annotated[list[str] | None, typer.Option("--split", metavar="NAME", help="Only this split of the release: a manifest's folder or name, e.g. QA_en, file_generation_en (repeat; default: every manifest found).")] = None,
    difficulty_steps: Annotated[int | None, typer.Option(help="Steps for rows without a step count (the release has none): every such task gets N.")] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """AIDABench (Hugging Face MichaelYang-lyx/AIDA): its files, and each split manifest imported as analytics tasks.

    Run it again to complete an interrupted download (files already there are not fetched again).
    What a manifest holds that cannot be imported is listed with its reason, never guessed."""
    from deskbench.tracks.analytics.fetch import AidaFetchOptions, fetch_aida

    options = AidaFetchOptions(out=out_dir, source=source, splits=tuple(dict.fromkeys(split or ())),
                               difficulty_steps=difficulty_steps)
    if not quiet and not as_json and source is None:
        err.print(f"downloading MichaelYang-lyx/AIDA into {escape(str(out_dir / 'snapshot'))} ...")
    summary = fetch_aida(options)
    if as_json:
        print(summary.model_dump_json(indent=2))
    else:
        _print(summary)


def _print(s: AidaFetchSummary) -> None:
    rev = f" at {s.revision[:12]}" if s.revision else ""
    out.print(f"AIDA from {escape(s.source)}{rev}")
    for m in s.imports:
        counts = ", ".join(f"{n} {c}" for c, n in m.by_category.items()) or "none"
        out.print(f"  {escape(m.split)}: {m.tasks} tasks ({escape(counts)}) -> {escape(m.tasks_file)}")
        for reason, ids in m.skipped.items():
            err.print(f"  [yellow]skipped {len(ids)}[/yellow] ({escape(reason)}): {escape(', '.join(ids[:10]))}"
                      + (" ..." if len(ids) > 10 else ""))
    first = next((m.tasks_file for m in s.imports if m.tasks), None)
    if first is not None:
        out.print(f"next: deskbench analyse task-stats {escape(first)}; deskbench run --tasks {escape(first)} "
                  "--agent analyst-agent --model MODEL --out RUNDIR")
