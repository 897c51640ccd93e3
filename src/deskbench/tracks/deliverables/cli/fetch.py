"""`deskbench fetch dra`: the consulting DRA corpus (Hugging Face deccan-ai/dra-bench) as
deliverables packages (tracks/deliverables/fetch.py); the core's `fetch` group takes it through
Track.cli_commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from deskbench.cli.common import JsonOpt, QuietOpt
from deskbench.console import err, out

if TYPE_CHECKING:
    from deskbench.tracks.deliverables.fetch import DraFetchSummary


def register(app: typer.Typer) -> None:
    """Add `fetch dra` (app is the holder cli/root.py adds to the `fetch` group)."""
    app.command("dra")(fetch_dra_cmd)


def fetch_dra_cmd(
    source: Annotated[Path | None, typer.Option("--from", help="A snapshot folder of the dataset, as `hf download deccan-ai/dra-bench --repo-type dataset --local-dir DIR` leaves it; without it the dataset is downloaded from the hub with your token (HF_TOKEN or `hf auth login`), after you accept its terms at https://huggingface.co/datasets/deccan-ai/dra-bench.")] = None,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder to write: tasks/<id>/ (one package each, with its input files), snapshot/ (from the hub), fetch.json.")] = Path("dra"),
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N tasks.")] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """The consulting DRA paper's 42 tasks (gated) as deliverables packages, their verifier prose read
    into verifier specs; the tasks' text is written under --out only (the terms forbid redistributing it)."""
    from deskbench.tracks.deliverables.fetch import DraFetchOptions, fetch_dra

    def shown(task_id: str) -> None:
        if not quiet and not as_json:
            err.print(f"  {escape(task_id)}", highlight=False)

    summary = fetch_dra(DraFetchOptions(out=out_dir, source=source, limit=limit), on_task=shown)
    if as_json:
        print(summary.model_dump_json(indent=2))
    else:
        _print(summary)


def _print(s: DraFetchSummary) -> None:
    rev = f" at {s.revision[:12]}" if s.revision else ""
    out.print(f"DRA from {escape(s.source)}{rev}: {len(s.tasks)} packages -> {escape(s.tasks_dir)}")
    uncertain = [t for t in s.tasks if t.verifier_parse != "clean"]
    kinds: dict[str, int] = {}
    for t in s.tasks:
        for k, n in t.verifier_kinds.items():
            kinds[k] = kinds.get(k, 0) + n
    out.print(f"  verifiers: {sum(t.verifiers for t in s.tasks)} ("
              + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")")
    inferred = sum(t.discipline_from == "prompt" for t in s.tasks)
    if inferred:
        out.print(f"  corpus discipline read from the prompt's wording for {inferred} task(s) (fetch.json says which)")
    for t in uncertain:
        err.print(f"[yellow]check[/yellow] {escape(t.id)}: verifier numbering uncertain "
                  f"({escape('; '.join(t.verifier_problems))})")
    for skipped in s.skipped:
        err.print(f"[yellow]skipped[/yellow] {escape(skipped.id or '(no id)')}: {escape(skipped.reason)}")
    if s.tasks:
        out.print(f"next: deskbench run --tasks {escape(s.tasks_dir)} --agent deliverable-agent --model MODEL "
                  "--out RUNDIR")
