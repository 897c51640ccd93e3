"""`deskbench calibrate ...`: the judge's sensitivity q1 and specificity q0 from human labels.

sample   a deterministic sample of (question, gold variants, prediction) items from docqa runs
         (with --judge: the scorer's verdict stored in each item, and the sample stratified by it);
         from analytics runs, scored items with the verdict of the evaluator that decided each
         (--judge for QA, --chart-judge, --file-judge as `deskbench score` takes them; --category
         to sample one category), stratified by category, evaluator and verdict
compute  q1, q0 and the raw agreement rate with counts and Wilson intervals from the items and a
         labels JSONL, per category for analytics (writes nothing; save the --json output for
         `deskbench score --judge-calibration FILE`)

Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.settings import CacheOpt, JudgeCacheOpt, JudgeConcurrencyOpt
from deskbench.console import out as _out
from deskbench.errors import UserError


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def _print_q(cal, indent: str = "") -> None:  # cal: Calibration
    _out.print(f"{indent}agreement {_pct(cal.agreement)}{_ci(cal.agreement_ci)} = (tp + tn) {cal.tp + cal.tn:g} / "
               f"{cal.n_labelled} labelled")
    _out.print(f"{indent}q1 (sensitivity) {_pct(cal.q1)}{_ci(cal.q1_ci)} = tp {cal.tp:g} / m1 {cal.m1} human-correct "
               f"(fn {cal.fn:g})")
    _out.print(f"{indent}q0 (specificity) {_pct(cal.q0)}{_ci(cal.q0_ci)} = tn {cal.tn:g} / m0 {cal.m0} human-incorrect "
               f"(fp {cal.fp:g})")
    _out.print(f"{indent}partial verdicts: {cal.n_partial} (counted half correct, half incorrect); unlabelled "
               f"{cal.n_unlabelled}; labellers disagree {cal.n_disagreed}; no verdict {cal.n_no_verdict}")


def _track(run_dirs: list[Path]) -> str:
    """docqa or analytics: every run directory of one of them."""
    from deskbench.runs.store import RunStore

    if not run_dirs:
        raise UserError("give at least one run directory")
    tracks = {}
    for d in run_dirs:
        store = RunStore(d, create=False)
        tracks[d] = store.track()
        store.close()
    kinds = set(tracks.values())
    if len(kinds) > 1:
        raise UserError("the run directories mix tracks (" + ", ".join(f"{d}: {t}" for d, t in tracks.items())
                        + "); sample one track at a time")
    (track,) = kinds
    if track not in ("docqa", "analytics"):
        raise UserError(f"{run_dirs[0]} is a {track} run; judge calibration needs docqa or analytics runs")
    return track


def _analytics_items(run_dirs: list[Path], *, system: str | None, category: str | None, judge: str | None,
                     chart_judge: str | None, file_judge: str | None, file_judge_all: bool | None,
                     unsafe_local: bool, concurrency: int, cache_flags: bool):  # -> (items, skipped)
    """The analytics items scored by the judges `deskbench score` would build from these flags."""
    from deskbench.models.registry import preflight
    from deskbench.tracks.analytics.score_command import (
        _judge_model,
        close_judges,
        file_judge_for,
        file_judge_mode,
    )
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges
    from deskbench.tracks.analytics.scoring.analytics_calibration import analytics_items

    if category is not None and category not in ("qa", "visualization", "file_generation"):
        raise UserError(f"--category {category!r} is not valid; use qa, visualization or file_generation")
    if cache_flags:
        raise UserError("--judge-cache and --no-cache are for docqa runs; analytics judges always use the "
                        "response cache, as 'deskbench score' does (DESKBENCH_CACHE_DIR moves it)")
    chart_judge = chart_judge or judge
    every_file = file_judge_mode(file_judge, file_judge_all)
    for name in (judge, chart_judge, file_judge):
        if name:
            preflight(name, role="judge")
    judges = AnalyticsJudges(qa=_judge_model(judge, concurrency), chart=_judge_model(chart_judge, concurrency),
                             file=file_judge_for(file_judge, concurrency, unsafe_local=unsafe_local),
                             file_all=every_file)
    try:
        return analytics_items(run_dirs, judges, system=system, category=category,  # type: ignore[arg-type]
                               concurrency=concurrency)
    finally:
        close_judges(judges)


def register(app: typer.Typer) -> None:
    """Add the `calibrate` command group to `app`."""
    cal_app = typer.Typer(no_args_is_help=True,
                          help="Judge calibration on human labels (q0, q1, m0, m1 for the Rogan-Gladen correction).")
    app.add_typer(cal_app, name="calibrate")

    @cal_app.command("sample")
    def sample_cmd(
        run_dirs: Annotated[list[Path], typer.Argument(help="docqa or analytics run directories (the --out of "
                                                            "'deskbench run').")],
        output: Annotated[Path, typer.Option("--output", help="Items JSONL to write.")],
        n: Annotated[int, typer.Option("--num-items", help="Items in the sample.")] = 200,
        seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
        system: Annotated[str | None, typer.Option(help="Sample only this system's answers.")] = None,
        judge: Annotated[str | None, typer.Option(help="LLM judge model: its verdicts are stored in the items "
                                                       "and the sample is stratified by them (analytics: the QA "
                                                       "judge, Listing 2).")] = None,
        judge_cache: JudgeCacheOpt = None,
        cache: CacheOpt = True,
        concurrency: JudgeConcurrencyOpt = 16,
        category: Annotated[str | None, typer.Option(help="analytics: sample only qa, visualization or "
                                                          "file_generation items.")] = None,
        chart_judge: Annotated[str | None, typer.Option(help="analytics: vision judge for charts (default: "
                                                             "--judge).")] = None,
        file_judge: Annotated[str | None, typer.Option("--file-judge", help="analytics: the File Judge model "
                                                       "(Listing 5); without it the comparator decides files.")] = None,
        file_judge_all: Annotated[bool | None, typer.Option("--file-judge-all/--file-judge-deferred", help=(
            "analytics: with --file-judge, every file to the File Judge (the default) | only files the "
            "comparator cannot read."))] = None,
        unsafe_local: Annotated[bool, typer.Option("--unsafe-local", help="analytics: run the File Judge's code "
                                                   "without bubblewrap (unsafe; debugging only).")] = False,
    ) -> None:
        """Write a deterministic sample of items to label (judges every non-exact answer first with --judge;
        analytics runs are scored by their evaluators, as 'deskbench score' scores them)."""
        from deskbench.scoring.judge_calibration import (
            collect_items,
            judge_items,
            sample_items,
            write_items,
        )

        if n < 1:
            raise UserError(f"--num-items {n} is not valid; use 1 or more")
        if concurrency < 1:
            raise UserError(f"--judge-concurrency {concurrency} is not valid; use 1 or more")
        track = _track(run_dirs)
        if track == "analytics":
            items, skipped = _analytics_items(run_dirs, system=system, category=category, judge=judge,
                                              chart_judge=chart_judge, file_judge=file_judge,
                                              file_judge_all=file_judge_all, unsafe_local=unsafe_local,
                                              concurrency=concurrency, cache_flags=judge_cache is not None or not cache)
        else:
            for flag, given in (("--category", category), ("--chart-judge", chart_judge), ("--file-judge", file_judge),
                                ("--file-judge-all/--file-judge-deferred", file_judge_all is not None),
                                ("--unsafe-local", unsafe_local)):
                if given:
                    raise UserError(f"{flag} is for analytics runs; {run_dirs[0]} is a docqa run: drop {flag}")
            items, skipped = collect_items(run_dirs, system), Counter()
        if judge and track == "docqa":
            from deskbench.tracks.docqa.score_command import make_judge

            items = judge_items(items, make_judge(judge, judge_cache, not cache, concurrency))
        chosen = sample_items(items, n, seed)
        if not chosen:
            raise UserError("every item was left unscored by its evaluator: nothing to sample; give the judge "
                            "models (--judge, --chart-judge, --file-judge) and check they answer")
        write_items(output, chosen)
        by: dict[str, int] = {}
        for item in chosen:
            if item.track == "analytics":
                key = f"{item.category} {item.verdict_source} {item.judge_verdict:g}"
            else:
                key = "unjudged" if item.verdict_source is None else (
                    "exact" if item.verdict_source == "exact" else str(item.judge_verdict))
            by[key] = by.get(key, 0) + 1
        unscored = sum(1 for i in items if i.verdict_source is not None and i.judge_verdict is None)
        _out.print(f"wrote {len(chosen)} of {len(items)} items to {output} "
                   f"({', '.join(f'{k}: {v}' for k, v in sorted(by.items()))})"
                   + (f"; {unscored} unscored by the judge, not sampled" if unscored else "")
                   + "".join(f"; {v} left out ({k})" for k, v in sorted(skipped.items())))

    @cal_app.command("compute")
    def compute_cmd(
        items_path: Annotated[Path, typer.Argument(help="Items JSONL (from 'deskbench calibrate sample --judge').")],
        labels_path: Annotated[Path, typer.Argument(help="Human labels JSONL: item_id, labeller, label, timestamp.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the calibration as JSON (the file "
                                                            "'deskbench score --judge-calibration' reads).")] = False,
    ) -> None:
        """Print the judge's q1 (sensitivity), q0 (specificity) and agreement with counts and Wilson 95% intervals
        (analytics: per category too)."""
        from deskbench.scoring.judge_calibration import (
            calibration_json,
            calibration_of,
            read_items,
            read_labels,
        )

        items = read_items(items_path)
        if all(i.verdict_source is None for i in items):
            raise UserError(f"{items_path}: no item carries a judge verdict; sample again with --judge MODEL")
        labels = read_labels(labels_path, items)
        cal = calibration_of(items, labels)
        if as_json:
            print(calibration_json(cal))
            return
        _out.print(f"judge {cal.judge or '?'}: {cal.n_labelled} labelled items by {len(cal.labellers)} labeller(s)")
        _print_q(cal)
        for cat, sub in cal.by_category.items():
            _out.print(f"-- {cat}: judge {sub.judge or '?'}, {sub.n_labelled} labelled items")
            _print_q(sub, indent="   ")
        if any(i.category == "visualization" for i in items):
            from deskbench.tracks.analytics.scoring.analytics_calibration import CHART_RULE

            _out.print(f"charts: {CHART_RULE}")
        if cal.by_category:
            _out.print("Wilson 95% intervals. The agreement is what AIDABench §3.3.4 reports per evaluator (> 95% "
                       "qa and files, > 90% charts); 'deskbench score' applies no bias correction to analytics runs.")
            return
        _out.print("Wilson 95% intervals. Save with --json > cal.json and use "
                   "'deskbench score RUN --judge MODEL --judge-calibration cal.json'.")
