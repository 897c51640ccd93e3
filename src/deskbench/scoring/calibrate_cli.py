"""`deskbench calibrate ...`: the judge's sensitivity q1 and specificity q0 from human labels.

sample   a deterministic sample of (question, gold variants, prediction) items from docqa runs
         (with --judge: the scorer's verdict stored in each item, and the sample stratified by it)
compute  q1, q0 with counts and Wilson intervals from the items and a labels JSONL (writes nothing;
         save the --json output for `deskbench score --judge-calibration FILE`)

Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.console import out as _out
from deskbench.errors import UserError


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def register(app: typer.Typer) -> None:
    """Add the `calibrate` command group to `app`."""
    cal_app = typer.Typer(no_args_is_help=True,
                          help="Judge calibration on human labels (q0, q1, m0, m1 for the Rogan-Gladen correction).")
    app.add_typer(cal_app, name="calibrate")

    @cal_app.command("sample")
    def sample_cmd(
        run_dirs: Annotated[list[Path], typer.Argument(help="docqa run directories (the --out of 'deskbench run').")],
        output: Annotated[Path, typer.Option("--output", "-o", help="Items JSONL to write.")],
        n: Annotated[int, typer.Option("--n", help="Items in the sample.")] = 200,
        seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
        system: Annotated[str | None, typer.Option(help="Sample only this system's answers.")] = None,
        judge: Annotated[str | None, typer.Option(help="LLM judge model: its verdicts are stored in the items "
                                                       "and the sample is stratified by them.")] = None,
        judge_cache: Annotated[Path | None, typer.Option(help="Judge response cache (SQLite).")] = None,
        no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not cache judge responses.")] = False,
        concurrency: Annotated[int, typer.Option(help="Judge calls in flight at once.")] = 16,
    ) -> None:
        """Write a deterministic sample of items to label (judges every non-exact answer first with --judge)."""
        from deskbench.scoring.judge_calibration import (
            collect_items,
            judge_items,
            sample_items,
            write_items,
        )

        if n < 1:
            raise UserError(f"--n {n} is not valid; use 1 or more")
        if concurrency < 1:
            raise UserError(f"--concurrency {concurrency} is not valid; use 1 or more")
        items = collect_items(run_dirs, system)
        if judge:
            from deskbench.cli import _make_judge

            items = judge_items(items, _make_judge(judge, judge_cache, no_cache, concurrency))
        chosen = sample_items(items, n, seed)
        write_items(output, chosen)
        by: dict[str, int] = {}
        for item in chosen:
            key = "unjudged" if item.verdict_source is None else (
                "exact" if item.verdict_source == "exact" else str(item.judge_verdict))
            by[key] = by.get(key, 0) + 1
        unscored = sum(1 for i in items if i.verdict_source == "judge" and i.judge_verdict is None)
        _out.print(f"wrote {len(chosen)} of {len(items)} items to {output} "
                   f"({', '.join(f'{k}: {v}' for k, v in sorted(by.items()))})"
                   + (f"; {unscored} unscored by the judge, not sampled" if unscored else ""))

    @cal_app.command("compute")
    def compute_cmd(
        items_path: Annotated[Path, typer.Argument(help="Items JSONL (from 'deskbench calibrate sample --judge').")],
        labels_path: Annotated[Path, typer.Argument(help="Human labels JSONL: item_id, labeller, label, timestamp.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the calibration as JSON (the file "
                                                            "'deskbench score --judge-calibration' reads).")] = False,
    ) -> None:
        """Print the judge's q1 (sensitivity) and q0 (specificity) with counts and Wilson 95% intervals."""
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
        ci1 = f" [{cal.q1_ci[0]:.3f}, {cal.q1_ci[1]:.3f}]" if cal.q1_ci else ""
        ci0 = f" [{cal.q0_ci[0]:.3f}, {cal.q0_ci[1]:.3f}]" if cal.q0_ci else ""
        _out.print(f"q1 (sensitivity) {_pct(cal.q1)}{ci1} = tp {cal.tp:g} / m1 {cal.m1} human-correct (fn {cal.fn:g})")
        _out.print(f"q0 (specificity) {_pct(cal.q0)}{ci0} = tn {cal.tn:g} / m0 {cal.m0} human-incorrect (fp {cal.fp:g})")
        _out.print(f"partial verdicts: {cal.n_partial} (counted half correct, half incorrect); unlabelled "
                   f"{cal.n_unlabelled}; labellers disagree {cal.n_disagreed}; no verdict {cal.n_no_verdict}")
        _out.print("Wilson 95% intervals. Save with --json > cal.json and use "
                   "'deskbench score RUN --judge MODEL --judge-calibration cal.json'.")
