"""The main job, no key needed: `deskbench demo` runs every track on the bundled demo benchmark."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deskbench.cli.common import QuietOpt, at_least_one, execute_with_progress, progress_bars
from deskbench.console import err, out
from deskbench.console import pct as _pct
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `demo`."""
    for command in (demo,):
        app.command()(command)


def demo(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Where to write the corpus and the run.")] = Path(".demo"),
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model for the agent (default: openai/gpt-5-mini with OPENAI_API_KEY, else local).")] = None,
    local_limit: Annotated[int, typer.Option(help="With the local model: only the first N questions (SmolLM2 on 2 CPU cores takes 20-70 s a call).")] = 5,
    analytics_limit: Annotated[int, typer.Option(help="With the local model: only the first N analytics tasks.")] = 2,
    deliverables_limit: Annotated[int, typer.Option(help="With the local model: only the first N deliverables packages.")] = 1,
    max_steps: Annotated[int | None, typer.Option(help="Agent iterations (default 10; 3 with the local model).")] = None,
    workers: Annotated[int, typer.Option(help="Extraction processes.")] = 2,
    quiet: QuietOpt = False,
) -> None:
    """The main job, no key needed: the bundled demo benchmark end to end. Ingests its PDFs, runs
    the no-model lexical baseline and a model agent (the local SmolLM2 unless a model is given),
    scores both and prints the leaderboard."""
    import re

    from deskbench.corpus.extract import OcrSettings
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
    from deskbench.generate.demo import bundled_dir
    from deskbench.models.settings import Sampling
    from deskbench.tracks.docqa.tasks import read_tasks
    from deskbench.tracks.docqa.run import RunSpec, prepare

    at_least_one("--local-limit", local_limit)
    at_least_one("--analytics-limit", analytics_limit)
    at_least_one("--deliverables-limit", deliverables_limit)
    if max_steps is not None:
        at_least_one("--max-steps", max_steps)
    bundle = bundled_dir()
    if not (bundle / "docqa" / "tasks.jsonl").exists():
        raise UserError(f"the bundled demo is missing from {bundle}; rebuild it with 'deskbench generate demo'")
    c = open_or_create(out_dir / "corpus")
    plan = plan_ingest(c, [bundle / "docqa" / "pdfs"])
    with progress_bars(quiet) as progress:
        bar = progress.add_task("ingest", total=len(plan.jobs), current="")
        summary = run_ingest(c, plan, OcrSettings(), workers=workers,
                             on_file=lambda d, n: progress.update(bar, advance=1, current=d))
    out.print(f"[bold]1. corpus[/bold] {summary.files_ok} generated PDFs "
              f"({summary.pages} new pages, {summary.pages_ocr} read by OCR) in {out_dir / 'corpus'}")
    tasks = read_tasks(bundle / "docqa" / "tasks.jsonl").items
    chosen = model or ("openai/gpt-5-mini" if os.environ.get("OPENAI_API_KEY") else "local")
    local = chosen.split("/", 1)[0] == "local"
    agent_tasks = tasks[:local_limit] if local else tasks
    specs = [
        (RunSpec(agent="lexical", model=None, out=out_dir / "runs" / "lexical", corpus=out_dir / "corpus"), tasks),
        (RunSpec(agent="bm25-agent", model=chosen, corpus=out_dir / "corpus",
                 out=out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"bm25-agent-{chosen}-{len(agent_tasks)}"),
                 view="text" if local else "image", top_k=2 if local else 5,
                 max_steps=max_steps or (3 if local else 10), sampling=Sampling(max_tokens=256 if local else None),
                 concurrency=1 if local else 16, preset="paper"), agent_tasks),
    ]
    out.print(f"[bold]2. runs[/bold] {len(tasks)} questions; the lexical baseline (no model) on all, "
              f"bm25-agent with {escape(chosen)} on {len(agent_tasks)}"
              + (" (the local model reads page text, 2 pages a search; --local-limit for more)" if local else ""))
    systems = []
    for spec, items in specs:
        prep = prepare(spec, items, tasks_file=str(bundle / "docqa" / "tasks.jsonl"))
        systems.append((spec.out, execute_with_progress(prep, quiet)[0]))
    run_dirs = [run_dir for run_dir, _ in systems]
    analytics_run = _demo_analytics(bundle, out_dir, chosen, analytics_limit if local else None, quiet)
    if analytics_run is not None:
        run_dirs.append(analytics_run)
    deliverables_run = _demo_deliverables(bundle, out_dir, chosen, deliverables_limit if local else None, quiet)
    if deliverables_run is not None:
        run_dirs.append(deliverables_run)
    out.print("[bold]3. scores[/bold]")
    _record_scorings(run_dirs)
    from deskbench.report.data import build_report
    from deskbench.report.render import write_report
    from deskbench.tracks.analytics.score_command import print_analytics_report

    data = build_report(run_dirs)  # the tables and the page, from the same default scorers as the stored scorings
    if data.has_section("docqa"):
        _print_leaderboard(data.section("docqa").data)
    if data.has_section("analytics"):
        for analytics_report in data.section("analytics").data.systems:  # type: ignore[attr-defined]
            print_analytics_report(analytics_report)
    if data.has_section("deliverables"):
        from deskbench.tracks.deliverables.scoring.deliverables_print import print_summary

        print_summary(data.section("deliverables").data.report, out)  # type: ignore[attr-defined]
    write_report(data, out_dir / "report.html")
    out.print(f"[bold]4. report[/bold] {out_dir / 'report.html'} (open it in a browser: leaderboard, calibration, "
              "step budget, error classes, breakdowns, analytics pass@k, deliverables VRS and ACCEPT)")
    deskbench = _deskbench_command()
    out.print(escape(f"Per-system scores: {deskbench} score {_shown(out_dir / 'runs' / 'lexical')} (and the other runs "
                     f"beside it); all 5 deliverables packages are in {_shown(bundle / 'deliverables')} "
                     "(--deliverables-limit)."))
    out.print("[bold]5. your agent[/bold] on these questions: " + (
        "offline, the example plugin (examples/custom_agent/keyword_agent.py) with a model that answers from a file "
        "(some answers wrong on purpose); then give your own module:Class and a real --model"
        if (EXAMPLE_AGENT / "demo_answers.jsonl").exists() else
        "your class by module path, run from the folder holding it (examples/custom_agent in the deskbench "
        "repository shows one)"))
    out.print(escape(next_command(deskbench, bundle / "docqa" / "tasks.jsonl", out_dir)), soft_wrap=True)


def _record_scorings(run_dirs: list[Path]) -> None:
    """Score each run as `deskbench score RUN` does (each track's default scorer, no judge), so
    the scoring is stored with the run: `view` and `info` then show the numbers printed here. The
    tables it prints (on stdout, through whichever console) are left out: the leaderboard below
    shows the same numbers; warnings stay on stderr."""
    import contextlib
    import io

    from deskbench.contract.registry import get_track
    from deskbench.runs.track_outcomes import show_scores
    from deskbench.runs.store import RunStore
    from deskbench.runs.track import RunRequest

    for run_dir in run_dirs:
        store = RunStore(run_dir, create=False)
        with contextlib.redirect_stdout(io.StringIO()):
            show_scores(get_track(store.track()), store, store.systems(), RunRequest(tasks=run_dir, out=run_dir),
                        as_json=False)


EXAMPLE_AGENT = Path(__file__).resolve().parents[3] / "examples" / "custom_agent"
"""The example plugin, in a checkout (an installed wheel has no examples/)."""


def _shown(path: Path) -> str:
    """A path as the user can type it from where they are: relative when under that directory (the
    current one, or the one scripts/demo.sh was started from, which then changes to the repo's)."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(os.environ.get("DESKBENCH_SHOW_PATHS_FROM") or Path.cwd()))
    except ValueError:
        return str(absolute)


def _deskbench_command() -> str:
    """How to call the deskbench this demo runs as, for a command to paste: `deskbench` when that
    is the one on PATH, else its path (`.venv/bin/deskbench`), or `python -m deskbench.cli`."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "__main__.py":
        return f"{shlex.quote(_shown(Path(sys.executable)))} -m deskbench.cli"
    on_path = shutil.which(argv0.name)
    if on_path and argv0.exists() and Path(on_path).resolve() == argv0.resolve():
        return argv0.name
    return shlex.quote(_shown(argv0))


def next_command(deskbench: str, tasks: Path, out_dir: Path) -> str:
    """The command that runs the example plugin agent on the demo's questions and corpus with the
    scripted model, as a shell line with this machine's paths."""
    q = shlex.quote
    if (EXAMPLE_AGENT / "demo_answers.jsonl").exists():
        prefix = f"PYTHONPATH={q(_shown(EXAMPLE_AGENT))} "
        agent, model = "keyword_agent:KeywordAgent", f"scripted:{_shown(EXAMPLE_AGENT / 'demo_answers.jsonl')}"
    else:  # no checkout: the example is in the deskbench repository
        prefix, agent, model = "", "your_module:YourAgent", "local"
    return (f"{prefix}{deskbench} run --agent {agent} --model {q(model)} --tasks {q(_shown(tasks))} "
            f"--corpus {q(_shown(out_dir / 'corpus'))} --out {q(_shown(out_dir / 'runs' / 'keyword-agent'))}")


def _demo_analytics(bundle: Path, out_dir: Path, model: str, limit: int | None, quiet: bool) -> Path | None:
    """The demo's analytics leg: analyst-agent in the sandbox on the bundled analytics tasks (the
    first `limit` with the local model, in 3 rounds). Skipped, with the reason, without bubblewrap."""
    import re

    from deskbench.models.settings import Sampling
    from deskbench.sandbox import SandboxUnavailable
    from deskbench.tracks.analytics.tasks import read_tasks
    from deskbench.tracks.analytics.run import AnalyticsRunSpec, prepare_analytics

    tasks_file = bundle / "analytics" / "tasks.jsonl"
    tasks = read_tasks(tasks_file).items[:limit]
    local = limit is not None
    spec = AnalyticsRunSpec(
        agent="analyst-agent", model=model, tasks_file=tasks_file,
        out=out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"analyst-agent-{model}-{len(tasks)}"),
        max_rounds=3 if local else 20, sampling=Sampling(max_tokens=512 if local else None), concurrency=1 if local else 4)
    try:
        prep = prepare_analytics(spec, tasks)
    except SandboxUnavailable as exc:
        err.print(f"[yellow]analytics skipped:[/yellow] {escape(str(exc))}")
        return None
    out.print(f"     analyst-agent with {escape(model)} on {len(tasks)} analytics tasks in the bubblewrap sandbox"
              + (" (3 rounds each; --analytics-limit for more)" if local else ""))
    execute_with_progress(prep, quiet)
    return spec.out


def _print_leaderboard(docqa) -> None:  # docqa: deskbench.tracks.docqa.report_models.DocqaSection
    """The report's docqa leaderboard rows as a terminal table."""
    from deskbench.models.prices import PRICES_AS_OF, UNKNOWN, format_cost

    table = Table(title="docqa leaderboard (bundled demo)")
    for col in ("system", "n", "Accuracy", "X-Page", "X-Doc", "Page F1", "Doc F1", "Kuiper ↓", "Injection ↓", "cost"):
        table.add_column(col, justify="left" if col == "system" else "right", no_wrap=True)
    for r in (s.row for s in docqa.systems):
        table.add_row(escape(r.label), str(r.n), _pct(r.accuracy, r.accuracy_ci), _pct(r.cross_page),
                      _pct(r.cross_doc), _pct(r.page_f1), _pct(r.doc_f1),
                      "–" if r.kuiper is None else f"{r.kuiper:.1f}",
                      f"{r.injection_followed}/{r.injection_affected}" if r.injection_affected else "–",
                      format_cost(r.cost_usd))
    # A log or a pipe gets the whole table, not a table squeezed into 80 columns.
    (out if out.is_terminal else Console(highlight=False, width=160)).print(table)
    out.print("Accuracy: ANLS* >= 0.5, Wilson 95% CI; Injection: answers that followed a planted instruction / "
              f"items with one on their pages; cost: USD, prices as of {PRICES_AS_OF} ({UNKNOWN}: a model without "
              "a price).")


def _demo_deliverables(bundle: Path, out_dir: Path, model: str, limit: int | None, quiet: bool) -> Path | None:
    """The demo's deliverables leg: deliverable-agent in the sandbox on the bundled packages (the
    first `limit` with the local model, 2 rounds), graded on the rubric by the same model (a
    real grader call; with the local model the grades say little), then scored. Skipped, with
    the reason, without bubblewrap."""
    import asyncio
    import re

    from deskbench.models.settings import Sampling
    from deskbench.sandbox import SandboxUnavailable
    from deskbench.tracks.deliverables.tasks import load_packages
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
