"""`deskbench run` on task packages, `deskbench diagnose`, and the deliverables part of `deskbench
score`: the CLI shell over tracks/deliverables/run.py (dispatch), runs/diagnose.py and scoring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from deskbench.console import err, out
from deskbench.errors import UserError
from deskbench.models.settings import Sampling
from deskbench.runs.store import RunStore


def score_deliverables(store: RunStore, *, systems: list[str] | None, judge: str | None, concurrency: int,
                       as_json: bool, items_out: Path | None = None, reviewed_only: bool = False) -> None:
    """Verifiers on every episode, the stored grades applied, the paper's tables printed, with
    which protocol produced them (score side, and each system's run side as the run stored it).
    `reviewed_only`: only QC-reviewed grades count (--reviewed-only)."""
    import asyncio

    from deskbench.tracks.analytics.cli import _judge_model, close_models
    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run
    from deskbench.tracks.deliverables.scoring.deliverables_summary import print_summary, summarize
    from deskbench.tracks.deliverables.scoring.failure_tags import regex_tags, tag_counts

    judge_model = _judge_model(judge, concurrency)
    try:
        items = asyncio.run(score_run(store, systems=systems, judge_model=judge_model, concurrency=concurrency))
    finally:
        close_models(judge_model)
    if not items:
        raise UserError(f"the run in {store.dir} has no episodes yet; run 'deskbench run' first")
    if items_out is not None:
        items_out.write_text("".join(i.model_dump_json() + "\n" for i in items), encoding="utf-8")
    from deskbench.runs.protocol import stored_protocol

    report = summarize(items, store.deliverable_tasks(), reviewed_only=reviewed_only)
    run_side = stored_protocol(store)
    report.run_protocol = {s: run_side[s] for s in report.systems if s in run_side}
    finals = GradeStore(store.dir).final_grades(None, verifiers=False)
    chosen = {k: f for k, f in finals.items() if systems is None or f.system in systems}
    report.failure_tags = tag_counts(chosen, regex_tags, name="regex")
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        print_summary(report, out)


def register(app: typer.Typer) -> None:
    """Add `deskbench diagnose`."""

    @app.command()
    def diagnose(
        run_dir: Annotated[Path, typer.Argument(help="A run directory (the --out of 'deskbench run').")],
        episodes: Annotated[bool, typer.Option("--episodes", help="Also list every failed episode with its category.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")] = False,
    ) -> None:
        """Failure categories per system, every track (timeouts, refusals, step and round limits,
        no answer, files not produced, file generation failures by cause), with cost and the share of
        episodes that produced what they must ('success': an answer, the required files; not accuracy)."""
        from deskbench.models.prices import UNKNOWN, format_cost
        from deskbench.runs.diagnose import CATEGORIES
        from deskbench.runs.diagnose import diagnose as run_diagnose

        store = RunStore(run_dir, create=False)
        eps = store.episodes()
        if not eps:
            raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
        track = store.track()
        tasks = {t.id: t for t in store.all_tasks()}  # type: ignore[attr-defined]
        result = run_diagnose(eps, tasks, track=track)
        if as_json:
            print(json.dumps(result.model_dump(mode="json", exclude={} if episodes else {"episodes"}), indent=2))
            return
        seen = [c for c in CATEGORIES if any(c in s.categories for s in result.systems)]
        table = Table(title=f"diagnose {run_dir}")
        for col in ("system", "episodes", "success", *seen, "cost $", "$ per ok", "tokens in/out"):
            table.add_column(col, justify="left" if col == "system" else "right")
        for s in result.systems:
            table.add_row(escape(s.system), str(s.episodes), f"{100 * s.success_rate:.1f}%",
                          *(str(s.categories.get(c, 0)) for c in seen),
                          format_cost(s.cost_usd, dollar=False),
                          UNKNOWN if not s.cost_known and s.ok else
                          "-" if s.cost_per_ok_usd is None else format_cost(s.cost_per_ok_usd, dollar=False),
                          f"{s.input_tokens}/{s.output_tokens}")
        out.print(table)
        out.print(f"cost: USD, prices as of {result.prices_as_of} ({UNKNOWN}: an episode called a model without a "
                  "price; 'deskbench run --prices FILE' prices such a model)")
        if episodes:
            for d in result.episodes:
                if d.category != "ok":
                    out.print(f"{escape(d.system)} {escape(d.task_id)}#{d.attempt}: [bold]{d.category}[/bold] "
                              f"{escape(d.detail)}")


def demo_deliverables(bundle: Path, out_dir: Path, model: str, limit: int | None, quiet: bool) -> Path | None:
    """The demo's deliverables leg: deliverable-agent in the sandbox on the bundled packages (the
    first `limit` with the local model, 2 rounds), graded on the rubric by the same model (a
    real grader call; with the local model the grades say little), then scored. Skipped, with
    the reason, without bubblewrap."""
    import asyncio
    import re

    from deskbench.sandbox import SandboxUnavailable
    from deskbench.tasks.deliverables import load_packages
    from deskbench.tracks.deliverables.run import (
        DeliverablesRunSpec,
        SystemSpec,
        prepare_deliverables,
    )

    packages = bundle / "deliverables"
    ids = [t.id for t in load_packages(packages)][:limit]
    local = limit is not None
    spec = DeliverablesRunSpec(
        systems=(SystemSpec("deliverable-agent", model),), packages=packages, only_tasks=tuple(ids),
        out=out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"deliverable-agent-{model}-{len(ids)}"),
        max_rounds=2 if local else 20, sampling=Sampling(max_tokens=512 if local else None), inline_chars=2500 if local else 24_000,
        concurrency=1 if local else 2)
    try:
        prep = prepare_deliverables(spec)
    except SandboxUnavailable as exc:
        err.print(f"[yellow]deliverables skipped:[/yellow] {escape(str(exc))}")
        return None
    out.print(f"     deliverable-agent with {escape(model)} on {len(ids)} deliverables packages in the sandbox"
              + (" (2 rounds each; --deliverables-limit for more)" if local else ""))
    from deskbench.cli import execute_with_progress

    execute_with_progress(prep, quiet)
    from deskbench.models.registry import open_model
    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.rubric_run import episodes_to_grade, grade_run

    grades = GradeStore(spec.out)
    grader = open_model(model, role="judge", concurrency=1 if local else 4, cache=True,
                        sampling=Sampling(max_tokens=768) if local else None)
    todo, _ = episodes_to_grade(grades, grader.id)

    async def go():  # -> GradingCounts
        try:
            return await grade_run(grades, grader, todo, concurrency=1 if local else 4)
        finally:
            await grader.aclose()

    counts = asyncio.run(go())
    grades.close()
    out.print(f"     rubric graded by {escape(grader.id)}: {counts.graded} graded, {counts.failed} could not be graded"
              + (" (a 135M model is a poor grader: this shows the pipeline, not a verdict)" if local else ""))
    return spec.out
