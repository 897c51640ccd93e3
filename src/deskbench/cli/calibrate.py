"""`deskbench calibrate ...`: the judge's sensitivity q1 and specificity q0 from human labels.

sample   a deterministic sample of items from runs of one track, as the track gives them
         (Track.judge_calibration: docqa's (question, gold variants, prediction) with --judge's
         verdict, analytics' scored items with the verdict of the evaluator that decided each),
         stratified by category, evaluator and verdict
compute  q1, q0 and the raw agreement rate with counts and Wilson intervals from the items and a
         labels JSONL, per category for analytics (writes nothing; save the --json output for
         `deskbench score --judge-calibration FILE`)

Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deskbench.cli.settings import CacheOpt, JudgeCacheOpt, JudgeConcurrencyOpt
from deskbench.console import out as _out
from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.scoring.judge_calibration import Calibration


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def _print_q(cal: Calibration, indent: str = "") -> None:
    _out.print(f"{indent}agreement {_pct(cal.agreement)}{_ci(cal.agreement_ci)} = (tp + tn) {cal.tp + cal.tn:g} / "
               f"{cal.n_labelled} labelled")
    _out.print(f"{indent}q1 (sensitivity) {_pct(cal.q1)}{_ci(cal.q1_ci)} = tp {cal.tp:g} / m1 {cal.m1} human-correct "
               f"(fn {cal.fn:g})")
    _out.print(f"{indent}q0 (specificity) {_pct(cal.q0)}{_ci(cal.q0_ci)} = tn {cal.tn:g} / m0 {cal.m0} human-incorrect "
               f"(fp {cal.fp:g})")
    _out.print(f"{indent}partial verdicts: {cal.n_partial} (counted half correct, half incorrect); unlabelled "
               f"{cal.n_unlabelled}; labellers disagree {cal.n_disagreed}; no verdict {cal.n_no_verdict}")
    if cal.n_human_partial:
        _out.print(f"{indent}labelled partial by people: {cal.n_human_partial} (in the kappa, not in q0 / q1)")
    qwk = "–" if cal.qwk is None else f"{cal.qwk:.3f}"
    _out.print(f"{indent}quadratic-weighted kappa {qwk} over {cal.qwk_n} items the judge was asked about "
               "(incorrect < partial < correct; exact matches left out, as MADQA §3.1)")


def _track(run_dirs: list[Path]) -> str:
    """The one track of every run directory, a track with a judge to calibrate (Track.judge_calibration)."""
    from deskbench.contract.registry import get_track, tracks
    from deskbench.runs.store import RunStore

    if not run_dirs:
        raise UserError("give at least one run directory")
    found = {}
    for d in run_dirs:
        store = RunStore(d, create=False)
        found[d] = store.track()
        store.close()
    kinds = set(found.values())
    if len(kinds) > 1:
        raise UserError("the run directories mix tracks (" + ", ".join(f"{d}: {t}" for d, t in found.items())
                        + "); sample one track at a time")
    (track,) = kinds
    if get_track(track).judge_calibration() is None:
        takers = [name for name, t in tracks().items() if t.judge_calibration() is not None]
        raise UserError(f"{run_dirs[0]} is a {track} run; judge calibration needs {' or '.join(takers)} runs")
    return track


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
        from deskbench.scoring.judge_calibration import sample_items, write_items

        if n < 1:
            raise UserError(f"--num-items {n} is not valid; use 1 or more")
        if concurrency < 1:
            raise UserError(f"--judge-concurrency {concurrency} is not valid; use 1 or more")
        from deskbench.contract.registry import get_track

        calibration = get_track(_track(run_dirs)).judge_calibration()
        assert calibration is not None
        params = {"system": system, "judge": judge, "judge_cache": judge_cache, "cache": cache,
                  "concurrency": concurrency, "category": category, "chart_judge": chart_judge,
                  "file_judge": file_judge, "file_judge_all": file_judge_all, "unsafe_local": unsafe_local}
        found, skipped = calibration.sample_items(run_dirs, params)
        items = list(found)
        chosen = sample_items(items, n, seed)
        if not chosen:
            raise UserError("every item was left unscored by its evaluator: nothing to sample; give the judge "
                            "models (--judge, --chart-judge, --file-judge) and check they answer")
        write_items(output, chosen)
        by: dict[str, int] = {}
        for item in chosen:
            if item.category is not None:  # a track whose items have categories (analytics)
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
        from deskbench.contract.registry import tracks

        for name, track in tracks().items():  # what a verdict means for each track's items
            calibration = track.judge_calibration()
            note = calibration.note([i for i in items if i.track == name]) if calibration is not None else None
            if note:
                _out.print(note)
        if cal.by_category:
            _out.print("Wilson 95% intervals. The agreement is what AIDABench §3.3.4 reports per evaluator (> 95% "
                       "qa and files, > 90% charts); 'deskbench score' applies no bias correction to analytics runs.")
            return
        _out.print("Wilson 95% intervals. Save with --json > cal.json and use "
                   "'deskbench score RUN --judge MODEL --judge-calibration cal.json'.")
