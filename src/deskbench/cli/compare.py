"""`deskbench compare RUNDIR...`: the systems of runs of one track, on the tasks they all ran, with
paired tests (analysis/compare.py) on each track's item outcomes (runs/outcomes.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deskbench.cli.settings import (
    CapabilitiesOpt,
    JudgeConcurrencyOpt,
    JudgeMaxTokensOpt,
    JudgeReasoningEffortOpt,
    JudgeTemperatureOpt,
    JudgeTopPOpt,
    use_model_flags,
)
from deskbench.cli.track_flags import with_track_flags
from deskbench.console import err, out
from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.analysis.compare import Comparison, ReliabilityComparison
    from deskbench.runs.store import RunStore


def _fmt_pct(x: float | None, ci: tuple[float, float] | None = None) -> str:
    if x is None:
        return "–"
    text = f"{100 * x:.1f}"
    return text + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci is not None else "")


def _fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.4f}"


def _fmt_num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def print_comparison(c: Comparison) -> None:
    """The leaderboard and the pairs as terminal tables, then the method and the notes."""
    console = out if out.is_terminal else Console(highlight=False, width=200)
    board = Table(title=f"{c.track} comparison: {len(c.common_tasks)} common tasks, attempt {c.attempt}")
    for col in ("#", "system", "n common", "scored", "correct", "accuracy % [95% CI]", "mean score % [95% CI]"):
        board.add_column(col, justify="left" if col == "system" else "right")
    for r in c.leaderboard:
        board.add_row(str(r.rank), escape(r.system), str(r.n_common), str(r.n_scored), str(r.n_correct),
                      _fmt_pct(r.accuracy, r.accuracy_ci), _fmt_pct(r.mean_score, r.mean_score_ci))
    console.print(board)
    pairs = Table(title="pairs (a vs b): exact McNemar on correct, Holm across pairs; paired bootstrap of score a - b")
    for col in ("a vs b", "paired", "b10", "b01", "McNemar p", "Holm p", "mean diff (pts) [95% CI]",
                "Cohen's d", "odds ratio b10/b01"):
        pairs.add_column(col, justify="left" if col == "a vs b" else "right")
    for p in c.pairs:
        diff = "–" if p.mean_diff is None else f"{100 * p.mean_diff:+.1f}" + (
            f" [{100 * p.mean_diff_ci[0]:+.1f}, {100 * p.mean_diff_ci[1]:+.1f}]" if p.mean_diff_ci else "")
        pairs.add_row(f"{escape(p.a)} vs {escape(p.b)}", f"{p.n_paired}/{p.n_common}", str(p.a_only), str(p.b_only),
                      _fmt_p(p.mcnemar_p), _fmt_p(p.p_holm), diff, _fmt_num(p.cohens_d), _fmt_num(p.odds_ratio))
    console.print(pairs)
    out.print(f"[dim]{escape(c.method)}. b10: a correct, b wrong; b01: the reverse. Accuracy: Wilson 95% CI; mean "
              f"score and mean diff: percentile bootstrap 95% ({c.resamples} resamples, seed {c.seed}); Cohen's d: "
              "pooled SD of the paired scores.[/dim]")
    if c.reliability is not None:
        print_reliability(c.reliability, console)
    for note in c.notes:
        out.print(f"note: {escape(note)}")


def print_reliability(r: ReliabilityComparison, console: Console) -> None:
    """pass^k of every system and the pairs' tests on it (analysis/compare.py reliability)."""
    k = r.k
    rows = Table(title=f"reliability across attempts (k={k}): pass^{k} = every attempt correct")
    for col in ("system", "tasks", f"pass^{k} % [95% CI]", f"pass^1..{k} %", f"pass@{k} %", f"avg@{k} %",
                f"solved 0..{k} of {k}", "consistent answers %"):
        rows.add_column(col, justify="left" if col == "system" else "right")
    for x in r.rows:
        rows.add_row(escape(x.system), str(x.n_tasks), _fmt_pct(x.pass_hat, x.pass_hat_ci),
                     " ".join(_fmt_pct(v) for v in x.curve), _fmt_pct(x.passk), _fmt_pct(x.avgk),
                     "/".join(str(n) for n in x.solved),
                     "–" if x.consistency is None else f"{_fmt_pct(x.consistency)} of {x.n_consistency}")
    console.print(rows)
    if r.pairs:
        pairs = Table(title=f"pairs on pass^{k} (every attempt correct): exact McNemar, Holm; paired bootstrap")
        for col in ("a vs b", "paired", "b10", "b01", "McNemar p", "Holm p", f"pass^{k} diff (pts) [95% CI]"):
            pairs.add_column(col, justify="left" if col == "a vs b" else "right")
        for p in r.pairs:
            diff = "–" if p.mean_diff is None else f"{100 * p.mean_diff:+.1f}" + (
                f" [{100 * p.mean_diff_ci[0]:+.1f}, {100 * p.mean_diff_ci[1]:+.1f}]" if p.mean_diff_ci else "")
            pairs.add_row(f"{escape(p.a)} vs {escape(p.b)}", str(p.n_paired), str(p.a_only), str(p.b_only),
                          _fmt_p(p.mcnemar_p), _fmt_p(p.p_holm), diff)
        console.print(pairs)
    out.print(f"[dim]{escape(r.rule)}; pass^{k} CI: Wilson 95%.[/dim]")


def _open_runs(run_dirs: list[Path]) -> tuple[list[RunStore], str]:
    from deskbench.paths import require_run
    from deskbench.runs.store import RunStore

    unique = list({d.resolve(): d for d in run_dirs}.values())  # a directory given twice is one run
    stores = []
    try:
        for d in unique:
            require_run(d)  # a typo names the runs nearby
            stores.append(RunStore(d, create=False))
        tracks = {s.track() for s in stores}
        if len(tracks) > 1:
            which = "; ".join(f"{s.dir} is {s.track()}" for s in stores)
            raise UserError(f"compare takes runs of one track, not {' and '.join(sorted(tracks))}: {which}")
    except BaseException:
        for s in stores:
            s.close()
        raise
    return stores, stores[0].track()


def register(app: typer.Typer) -> None:
    """Add `deskbench compare`."""

    def compare(
        ctx: typer.Context,
        run_dirs: Annotated[list[Path], typer.Argument(help="Run directories of one track (every system in each is compared).")],
        system: Annotated[list[str] | None, typer.Option("--system", help="Compare only these systems (as stored; repeat).")] = None,
        resamples: Annotated[int, typer.Option(help="Bootstrap resamples (mean score and paired mean difference).")] = 1000,
        seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
        output: Annotated[Path | None, typer.Option("--output", help="Also write the comparison as a self-contained HTML page.")] = None,
        judge: Annotated[str | None, typer.Option(help="LLM judge model, as 'deskbench score': docqa answers (else ANLS* >= 0.5), analytics QA (and charts without --chart-judge), deliverables llm_check verifiers.")] = None,
        concurrency: JudgeConcurrencyOpt = 16,
        judge_temperature: JudgeTemperatureOpt = None,
        judge_top_p: JudgeTopPOpt = None,
        judge_reasoning_effort: JudgeReasoningEffortOpt = None,
        judge_max_tokens: JudgeMaxTokensOpt = None,
        capabilities: CapabilitiesOpt = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON (one shape for any number of systems).")] = False,
    ) -> None:
        """Compare systems of one track (docqa, analytics or deliverables) on the tasks they all ran:
        a leaderboard over those tasks (the others listed per system), and for every pair of
        systems exact McNemar on correct/incorrect, Holm across pairs, a paired bootstrap of the
        score difference and Cohen's d. Attempt 0 of every task; unscored items are never wrong.
        Runs with --attempts K: pass^k (every attempt correct) per system, tested pairwise too."""
        from deskbench.analysis.compare import SystemOutcomes, system_labels
        from deskbench.analysis.compare import compare as compare_outcomes
        from deskbench.contract.registry import get_track
        from deskbench.runs.track_options import (
            check_options,
            given_flags,
            preflight_judges,
            track_options,
        )
        from deskbench.runs.track_outcomes import scorer_request

        if not run_dirs:
            raise UserError("give the run directories to compare")
        if resamples < 1:
            raise UserError(f"--resamples {resamples} is not valid; use 1 or more")
        if concurrency < 1:
            raise UserError(f"--judge-concurrency {concurrency} is not valid; use 1 or more")
        stores, track = _open_runs(run_dirs)
        try:
            check_options("compare", track, given_flags(ctx, "compare"))
            chosen: list[tuple[Path, str]] = []
            for store in stores:
                names = [s for s in store.systems() if not system or s in system]
                chosen += [(store.dir, s) for s in names]
            if system:
                missing = sorted(set(system) - {s for _, s in chosen})
                if missing:
                    raise UserError(f"no system {missing[0]!r} in these runs; they hold: "
                                    + ", ".join(sorted({s for st in stores for s in st.systems()})))
            if len(chosen) < 2:
                raise UserError(f"compare needs at least two systems; these runs hold {len(chosen)}: give more runs")
            use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                            judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
            own = track_options("compare", get_track(track), ctx.params)
            preflight_judges(judge, own)
            scoring = scorer_request(get_track(track), dict(own), judge=judge, concurrency=concurrency)  # its score options, from these
            with get_track(track).scorer_options(scoring) as options:
                by_dir = {st.dir: st for st in stores}
                systems = [SystemOutcomes(label=label, system=s, run_dir=str(d),
                                          outcomes=get_track(track).outcomes(by_dir[d], s, options))
                           for (d, s), label in zip(chosen, system_labels(chosen), strict=True)]
        finally:
            for st in stores:
                st.close()
        result = compare_outcomes(systems, track=track, method=get_track(track).outcome_definition, resamples=resamples, seed=seed)
        if output is not None:
            from deskbench.report.compare_page import write_compare_page

            write_compare_page(result, output)
        if as_json:
            print(result.model_dump_json(indent=2))
        else:
            print_comparison(result)
        if output is not None:
            err.print(f"wrote {output}")

    app.command(name="compare")(with_track_flags(compare, "compare", after="judge"))
