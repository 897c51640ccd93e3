"""`deskbench analyse items | splits | agreement`: item analysis over saved runs.

Thin shells over tracks/docqa/analysis/item_reports.py: load the response matrix, compute, write a
JSON report (its pydantic models are the schema) and, with --plot, a PNG. numpy and the analysis
modules are imported when a command runs, not when the command line starts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deskbench.cli.settings import CacheOpt, JudgeCacheOpt, JudgeConcurrencyOpt
from deskbench.errors import UserError

if TYPE_CHECKING:  # matplotlib is imported when a plot is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
from deskbench.tracks.docqa.cli.analyse_more import JudgeOpt, judging_of, say_scoring
from deskbench.tracks.docqa.cli.analyse_more import write_report as _write

analyse_app = typer.Typer(no_args_is_help=True, help="Analyses over stored runs (MADQA §2.2, §2.4, §5, App. B, D, E, H): items, splits, agreement, drift, guessability, multihop, lexical, effort, failures, trajectories, cost, human-time, corpus-stats, layout, modality, gold-check.")

RunDirsArg = Annotated[list[Path], typer.Argument(metavar="RUNDIR...", help="Run directories (deskbench run --out).")]
OutOpt = Annotated[Path, typer.Option("--output", help="JSON report to write.")]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Also write a PNG plot here.")]
PoolOpt = Annotated[bool, typer.Option("--pool-humans", help="One Human row (and one Human-oracle row) from every annotator's human:NAME episodes; an item answered by several annotators counts their earliest answer.")]


def _figure() -> tuple[Figure, Axes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7, 5))


def _save(fig: Figure, path: Path) -> None:
    import matplotlib.pyplot as plt

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}; choose another --plot path") from exc
    finally:
        plt.close(fig)


# -- items ----------------------------------------------------------------------------------


@analyse_app.command("items")
def items_cmd(
    run_dirs: RunDirsArg, output: OutOpt, plot: PlotOpt = None, pool: PoolOpt = False,
    judge: JudgeOpt = None, judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
) -> None:
    """Difficulty p_j and corrected point-biserial discrimination r_j of every common item."""
    from deskbench.tracks.docqa.analysis.item_reports import items_report, matrix_of
    from deskbench.tracks.docqa.analysis.splits import SENTINEL_P

    judging = judging_of(judge, judge_concurrency, judge_cache, cache)
    report = items_report(matrix_of(run_dirs, pool, judging))
    report.scoring = judging.summary()
    _write(output, report)
    say_scoring(report.scoring)
    if plot is not None:
        fig, ax = _figure()
        pts = [(s.difficulty, s.discrimination, s.sentinel) for s in report.items
               if s.difficulty is not None and s.discrimination is not None]
        for flag, colour, label in ((True, "tab:red", f"sentinel (p ≤ {SENTINEL_P})"), (False, "tab:blue", "other")):
            xs = [x for x, _, s in pts if s is flag]
            ys = [y for _, y, s in pts if s is flag]
            ax.scatter(xs, ys, s=18, c=colour, label=label, alpha=0.7)
        # Constant items (often the sentinels) have no r; show them on the zero line, marked apart.
        flat = [s.difficulty for s in report.items if s.difficulty is not None and s.discrimination is None]
        if flat:
            ax.scatter(flat, [0.0] * len(flat), s=30, marker="x", c="grey", label="r undefined (drawn at 0)")
        ax.axhline(0.0, color="grey", linewidth=0.5)
        ax.set_xlabel("difficulty p (mean accuracy)")
        ax.set_ylabel("discrimination r (corrected point-biserial)")
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(f"{report.n_items} items, {len(report.systems)} systems")
        ax.legend()
        _save(fig, plot)


# -- splits ---------------------------------------------------------------------------------


@analyse_app.command("splits")
def splits_cmd(
    run_dirs: RunDirsArg,
    output: OutOpt,
    test: Annotated[int, typer.Option("--test", help="Test split size.")],
    dev: Annotated[int, typer.Option("--dev", help="Dev split size.")],
    seed: Annotated[int, typer.Option(help="Seed for tie-breaking; same seed, same splits.")] = 0,
    train: Annotated[int | None, typer.Option("--train", help="Train size (default: every item left).")] = None,
    sentinel_fraction: Annotated[float, typer.Option(help="Share of each split reserved for p <= 0.1 items.")] = 0.2,  # splits.SENTINEL_FRACTION
    plot: PlotOpt = None,
    pool: PoolOpt = False,
    judge: JudgeOpt = None, judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
) -> None:
    """Test/dev/train splits by the paper's rule: sentinel pool, 9 difficulty bins, best discrimination."""
    import numpy as np

    from deskbench.tracks.docqa.analysis.item_reports import matrix_of, splits_report
    from deskbench.tracks.docqa.analysis.items import difficulty
    from deskbench.tracks.docqa.analysis.splits import (
        N_BINS,
        SENTINEL_P,
        difficulty_bin,
        is_sentinel,
    )

    judging = judging_of(judge, judge_concurrency, judge_cache, cache)
    rm = matrix_of(run_dirs, pool, judging)
    report = splits_report(rm, test, dev, seed, train, sentinel_fraction)
    report.scoring = judging.summary()
    _write(output, report)
    say_scoring(report.scoring)
    if plot is not None:
        # Bars over the paper's own bins (right-closed: 0.1 < p <= 0.2 ...), sentinel pool first.
        p = dict(zip(rm.items, difficulty(rm.values), strict=True))
        labels = [f"≤{SENTINEL_P:g}"] + [f"({0.1 * (b + 1):.1f},{0.1 * (b + 2):.1f}]" for b in range(N_BINS)]
        fig, ax = _figure()
        width = 0.27
        for k, (name, ids) in enumerate((("test", report.test), ("dev", report.dev), ("train", report.train))):
            counts = np.zeros(N_BINS + 1)
            for i in ids:
                b = difficulty_bin(p[i])
                if b is not None:
                    counts[b + 1] += 1
                elif is_sentinel(p[i]):
                    counts[0] += 1
            share = counts / counts.sum() if counts.sum() else counts
            ax.bar(np.arange(N_BINS + 1) + (k - 1) * width, share, width=width, label=f"{name} (n={len(ids)})")
        ax.set_xticks(range(N_BINS + 1), labels, rotation=45, ha="right")
        ax.set_xlabel("difficulty p (mean accuracy) bin")
        ax.set_ylabel("share of the split")
        rho = report.summary["test"].spearman_vs_full
        ax.set_title("difficulty by split" + (f"; test vs full Spearman ρ = {rho:.2f}" if rho is not None else ""))
        ax.legend()
        _save(fig, plot)


# -- agreement ------------------------------------------------------------------------------


@analyse_app.command("agreement")
def agreement_cmd(
    run_dirs: RunDirsArg, output: OutOpt, plot: PlotOpt = None, pool: PoolOpt = False,
    judge: JudgeOpt = None, judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
) -> None:
    """Pairwise Cohen's kappa between systems (people included) on correct/incorrect, over items
    both were scored on, with who solved what for every pair (MADQA H.4)."""
    import numpy as np

    from deskbench.tracks.docqa.analysis.item_reports import agreement_report, matrix_of

    judging = judging_of(judge, judge_concurrency, judge_cache, cache)
    report = agreement_report(matrix_of(run_dirs, pool, judging))
    report.scoring = judging.summary()
    _write(output, report)
    say_scoring(report.scoring)
    if plot is not None:
        k = np.array([[np.nan if x is None else x for x in row] for row in report.kappa], dtype=np.float64)
        n = len(report.systems)
        fig, ax = _figure()
        im = ax.imshow(k, vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(n), report.systems, rotation=45, ha="right")
        ax.set_yticks(range(n), report.systems)
        for i in range(n):
            for j in range(n):
                ax.text(j, i, "–" if math.isnan(k[i, j]) else f"{k[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if not math.isnan(k[i, j]) and abs(k[i, j]) > 0.6 else "black")
        fig.colorbar(im, ax=ax, label="Cohen's κ")
        ax.set_title("agreement on correct / incorrect")
        _save(fig, plot)


def register(app: typer.Typer) -> None:
    """Add the `analyse` group (this module's analyses, analyse_more.py's, analyse_madqa.py's,
    analyse_layout.py's and analyse_paper.py's)."""
    from deskbench.tracks.docqa.cli.analyse_layout import layout
    from deskbench.tracks.docqa.cli.analyse_madqa import register as register_madqa
    from deskbench.tracks.docqa.cli.analyse_more import register as register_more
    from deskbench.tracks.docqa.cli.analyse_paper import register as register_paper

    register_more(analyse_app)
    register_madqa(analyse_app)
    analyse_app.command("layout")(layout)
    register_paper(analyse_app)
    app.add_typer(analyse_app, name="analyse")
