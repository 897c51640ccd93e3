"""analytics' part of `deskbench score` (and of what `run` prints once the episodes are done): its
judges built from the flags, the run scored by tracks/analytics/scoring/analytics.py (evaluators) and
analytics_metrics (pass@k), the AIDABench tables printed (the command itself is cli/score.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deskbench.console import out, print_system_reports
from deskbench.errors import UserError
from deskbench.runs.outcomes import OutcomeOptions, ScorerRequest
from deskbench.runs.protocol import describe, system_protocol
from deskbench.runs.scorings import ScoringSettings, StoredItem
from deskbench.runs.store import RunStore
from deskbench.scoring.judges import close_models, open_judge
from deskbench.tracks.analytics.options import AnalyticsScoreOptions
from deskbench.tracks.analytics.scoring.analytics import (
    ERROR_CATEGORIES,
    AnalyticsItemScore,
    AnalyticsJudges,
    analytics_score_protocol,
    score_run,
)
from deskbench.tracks.analytics.scoring.analytics_metrics import (
    AnalyticsScoreReport,
    PassMetrics,
    attach_summary_ablations,
    summarize_analytics,
)
from deskbench.tracks.analytics.tasks import AnalyticsTask

if TYPE_CHECKING:
    from deskbench.tracks.analytics.scoring.file_judge import FileJudge



def file_judge_for(name: str | None, concurrency: int, *, unsafe_local: bool = False) -> FileJudge | None:
    """The File Judge behind --file-judge: its model (cached, as every judge) and a sandbox,
    made before any scoring so a missing bubblewrap is named first."""
    if not name:
        return None
    from deskbench.sandbox import Sandbox
    from deskbench.tracks.analytics.scoring.file_judge import FileJudge

    model = open_judge(name, concurrency)
    assert model is not None  # a name was given
    return FileJudge(model=model, sandbox=Sandbox(unsafe_local=unsafe_local))


def file_judge_mode(file_judge: str | None, file_judge_all: bool | None) -> bool:
    """--file-judge-all / --file-judge-deferred, checked: True sends every file to the File Judge.

    Why every file by default: --file-judge names the paper's evaluator (Listing 5), which judges
    every file; the defer-only mode (the comparator decides what it can read) is an opt-out."""
    if file_judge_all is not None and not file_judge:
        flag = "--file-judge-all" if file_judge_all else "--file-judge-deferred"
        raise UserError(f"{flag} needs a File Judge model: add --file-judge MODEL, or drop {flag}")
    return file_judge_all is not False


@contextmanager
def analytics_scorer_options(request: ScorerRequest) -> Iterator[OutcomeOptions]:
    """analytics' judges from a command's flags, as `deskbench score` builds them: `--judge` for QA
    (and charts without `--chart-judge`), `--file-judge` with `--file-judge-all/--file-judge-deferred`;
    closed on exit (`Track.scorer_options`)."""
    o = request.options_as(AnalyticsScoreOptions)
    concurrency, judge = request.concurrency, request.judge
    judges = AnalyticsJudges(qa=open_judge(judge, concurrency), chart=open_judge(o.chart_judge or judge, concurrency),
                             file=file_judge_for(o.file_judge, concurrency),
                             file_all=file_judge_mode(o.file_judge, o.file_judge_all))
    try:
        yield OutcomeOptions(scorer=judges, concurrency=concurrency)
    finally:
        close_judges(judges)


def close_judges(judges: AnalyticsJudges) -> None:
    """Close the judges' models (each once) and the File Judge's sandbox."""
    close_models(judges.qa, judges.chart, judges.file.model if judges.file else None)
    if judges.file is not None:
        judges.file.sandbox.close()


def score_analytics(store: RunStore, *, system: str | None, judge: str | None, chart_judge: str | None,
                    concurrency: int, items_out: Path | None, as_json: bool, file_judge: str | None = None,
                    file_judge_all: bool | None = None,
                    unsafe_local: bool = False) -> dict[str, AnalyticsScoreReport]:
    systems = [system] if system else store.systems()
    if not systems:
        raise UserError(f"the run in {store.dir} has no episodes yet; run 'deskbench run' first")
    if concurrency < 1:
        raise UserError(f"--concurrency {concurrency} is not valid; use 1 or more")
    every_file = file_judge_mode(file_judge, file_judge_all)
    tasks = store.tasks_of(AnalyticsTask)
    task_ids = [t.id for t in tasks]
    files = file_judge_for(file_judge, concurrency, unsafe_local=unsafe_local)
    judges = AnalyticsJudges(qa=open_judge(judge, concurrency), chart=open_judge(chart_judge, concurrency),
                             file=files, file_all=every_file)
    protocol = analytics_score_protocol(judges, tasks)

    async def go() -> dict[str, list[AnalyticsItemScore]]:
        return {name: await score_run(store, name, judges, concurrency=concurrency) for name in systems}

    from deskbench.scoring.judge_log import recording

    try:
        with recording(store):  # every judge call, kept with its episode (judge_transcripts)
            scored = asyncio.run(go())
    finally:
        close_judges(judges)
    reports = {}
    for name, items in scored.items():
        k = max([it.attempt + 1 for it in items], default=1)
        reports[name] = summarize_analytics(items, system=name, k=k, task_ids=task_ids,
                                            protocol=system_protocol(store, name, protocol))
    attach_summary_ablations(list(reports.values()))  # Table 2's Δ when a [no-summary] twin was scored too
    from deskbench.tracks.analytics.outcomes import analytics_outcomes
    from deskbench.tracks.analytics.scoring.analytics_items import store_rows

    every = [it for its in scored.values() for it in its]
    rows = store_rows(store, every)  # each item with its question, gold, prediction and judges' reasoning
    if items_out is not None:
        from deskbench.scoring.items_out import write_rows

        write_rows(items_out, rows)
    used = {"judge": judge, "chart_judge": chart_judge, "file_judge": file_judge,
            "file_judge_all": every_file if file_judge else None}
    scorer = "AIDABench's judges" if judge or chart_judge or file_judge else "deterministic fallbacks, no judge"
    store.record_scoring("analytics", ScoringSettings.of(scorer, used),
                         {name: r.model_dump(mode="json") for name, r in reports.items()},
                         [StoredItem.of(o, row, it.reason or f"{it.source}: no judge given")
                          for o, row, it in zip(analytics_outcomes(every), rows, every, strict=True)])
    if as_json:
        print_system_reports(reports)
    else:
        for report in reports.values():
            print_analytics_report(report)
    return reports


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.2f}"


def _count(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def print_analytics_report(r: AnalyticsScoreReport) -> None:
    console = out if out.is_terminal else Console(highlight=False, width=160)
    table = Table(title=f"analytics score: {r.system}")
    cols = ["group", "tasks", "pass@1", f"pass@{r.k}", f"avg@{r.k}", f"pass^{r.k}", "input tok", "output tok", "rounds"]
    for col in cols:
        table.add_column(col, justify="left" if col == "group" else "right")

    def row(label: str, m: PassMetrics) -> None:
        table.add_row(escape(label), str(m.n_tasks), _pct(m.pass1), _pct(m.passk) + ("" if m.complete else "*"),
                      _pct(m.avgk), _pct(m.reliability.pass_hat if m.reliability else None),
                      _count(m.mean_input_tokens), _count(m.mean_output_tokens),
                      "–" if m.mean_rounds is None else f"{m.mean_rounds:.1f}")

    row("overall", r.overall)
    for name, m in r.by_category.items():
        row(name, m)
    for name, m in r.by_difficulty.items():
        row(f"difficulty: {name}", m)
    console.print(table)
    if r.errors:
        t = Table(title="bad cases (failed episodes) by error category: count (share %, Figure 4)")
        t.add_column("category")
        for e in ERROR_CATEGORIES:
            t.add_column(e.replace("_", " "), justify="right")
        for cat, counts in r.errors.items():
            shares = r.error_shares.get(cat, {})
            t.add_row(cat, *(f"{counts[e]} ({_pct(shares.get(e))}%)" for e in ERROR_CATEGORIES))
        console.print(t)
    if r.summary_ablation is not None:
        a = r.summary_ablation
        t = Table(title=f"summary ablation (Table 2): avg@{a.k_with} of {a.with_summary}, Δ = w/o − w/")
        for col in ("group", "w/ summary", "Δ"):
            t.add_column(col, justify="left" if col == "group" else "right")
        for group, value in a.avg_with.items():
            d = a.delta[group]
            t.add_row(group, _pct(value), "–" if d is None else f"{100 * d:+.2f}")
        console.print(t)
        if a.k_with != a.k_without:
            console.print(f"Δ compares avg@{a.k_without} with avg@{a.k_with}: run both with the same --attempts (3 in the paper)")
    notes = [f"episodes {r.n_episodes} over {r.n_tasks} tasks x {r.k} attempts", f"unscored {r.n_unscored}"]
    if r.missing:
        notes.append(f"missing {len(r.missing)} (e.g. {r.missing[0]})")
    if r.glyph_failures:
        notes.append(f"charts with missing glyphs {r.glyph_failures}")
    notes.append("decided by " + ", ".join(f"{k} {v}" for k, v in r.sources.items()))
    console.print("; ".join(notes))
    if r.protocol:
        console.print("protocol: " + escape(describe(r.protocol)), soft_wrap=True)
    if r.overall.reliability is not None and r.k > 1:
        console.print(r.overall.reliability.line() + " (qa tasks' final values; pass^k: deskbench's, not the "
                      "paper's)", soft_wrap=True)
    if not r.overall.complete and r.k > 1:
        console.print(f"* pass@{r.k} over fewer than {r.k} scored attempts for some tasks")
