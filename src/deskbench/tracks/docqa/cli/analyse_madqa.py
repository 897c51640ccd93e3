"""`deskbench analyse effort | failures | trajectories | cost | human-time | corpus-stats | layout`: the
MADQA appendix analyses, thin shells over the modules of the same names. Each writes its pydantic
report as JSON (the model is the schema) to --output FILE and/or, with --json, to stdout; prints one
line per system on stderr (a figure the run data cannot support says "not computable: <why>");
with --plot, writes a PNG. `register` adds them to the `analyse` sub-app."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from deskbench.cli.settings import CacheOpt, JudgeCacheOpt, JudgeConcurrencyOpt
from deskbench.errors import UserError
from deskbench.tracks.docqa.cli.analyse_more import (
    CorpusOpt,
    JudgeOpt,
    PlotOpt,
    RunDirsArg,
    TasksOpt,
    judging_of,
    say_scoring,
    write_report,
)

if TYPE_CHECKING:  # type hints only: `deskbench --help` starts without pydantic
    from pydantic import BaseModel

OutOpt = Annotated[Path | None, typer.Option("--output", help="JSON report to write.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the JSON report on stdout.")]

PoolOpt = Annotated[bool, typer.Option("--pool-humans", help="One Human row from every annotator's human:NAME episodes (earliest answer per question).")]


def _say(text: str) -> None:
    typer.echo(text, err=True)


def _wanted(output: Path | None, as_json: bool) -> None:
    """Checked before any work: the report has to go somewhere."""
    if output is None and not as_json:
        raise UserError("say where the report goes: --output FILE.json, or --json to print it")


R = TypeVar("R", bound="BaseModel")


def _deliver(report: R, figure: Callable[[R], Any], lines: Callable[[R], Iterable[str]], output: Path | None,
             plot: Path | None, as_json: bool) -> None:
    """What every command does with its report: JSON to --output and/or stdout, the PNG with --plot,
    one line per system on stderr, then what was written."""
    if output is not None:
        write_report(output, report)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    if plot is not None:
        from deskbench.analysis.plotting import save_figure

        save_figure(figure(report), plot)
    for line in lines(report):
        _say(line)
    say_scoring(getattr(report, "scoring", None))
    written = [str(p) for p in (output, plot) if p is not None]
    if written:
        _say("wrote " + " and ".join(written))


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _effort_lines(report: Any) -> Iterator[str]:
    for s in report.systems:
        cells = [f"{k.measure} {_num(k.kuiper, '{:.1f}')}" if k.reason is None else f"{k.measure} {k.reason}"
                 for k in s.kuiper]
        yield f"{s.system}: Kuiper " + "; ".join(cells)


def effort(run_dirs: RunDirsArg, output: OutOpt = None, plot: PlotOpt = None, as_json: JsonOpt = False, pool: PoolOpt = False, judge: JudgeOpt = None,
           judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None, cache: CacheOpt = True) -> None:
    """Kuiper under each effort measure (steps, total tokens, generated tokens, time) and Spearman between them (MADQA E.4, Tables 11-12)."""
    from deskbench.tracks.docqa.analysis.effort import effort_figure, load_effort

    _wanted(output, as_json)
    _deliver(load_effort(run_dirs, pool, judging_of(judge, judge_concurrency, judge_cache, cache)), effort_figure, _effort_lines, output, plot, as_json)


TopOpt = Annotated[int, typer.Option("--top-systems", min=1, help="Pool this many most accurate systems for the hop-type and domain breakdowns (the paper: 4).")]


def _failures_lines(report: Any) -> Iterator[str]:
    for s in report.systems:
        c = s.cascade
        split = "" if s.overall.exact is None else f" ({s.overall.exact} exact, {s.overall.verbose} verbose)"
        yield (f"{s.system}: {s.overall.correct}/{s.overall.n} correct{split}; "
               + ", ".join(f"{k} {v}" for k, v in s.overall.counts.items())
               + f"; cascade {c.n} -> doc {c.doc_found} -> page {c.page_found} -> correct {c.correct}")


def failures(run_dirs: RunDirsArg, output: OutOpt = None, plot: PlotOpt = None, as_json: JsonOpt = False, pool: PoolOpt = False, top: TopOpt = 4, judge: JudgeOpt = None,
           judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None, cache: CacheOpt = True) -> None:
    """Retrieval vs comprehension, errors by hop type and domain, failure cascade (MADQA H.3, Figures 16-19)."""
    from deskbench.tracks.docqa.analysis.failures import failures_figure, load_failures

    _wanted(output, as_json)
    _deliver(load_failures(run_dirs, pool, top, judging_of(judge, judge_concurrency, judge_cache, cache)), failures_figure, _failures_lines, output, plot, as_json)


def _trajectories_lines(report: Any) -> Iterator[str]:
    for s in report.systems:
        if s.reason:
            yield f"{s.system}: {s.reason}"
            continue
        rate = "-" if s.recovery_rate is None else f"{100 * s.recovery_rate:.1f}%"
        yield (f"{s.system}: gold document found at search 1 {100 * s.document[0]:.1f}%, by {len(s.document)} "
               f"{100 * s.document[-1]:.1f}%; recovery {rate} (n={s.recovery_n})")


def trajectories(run_dirs: RunDirsArg, output: OutOpt = None, plot: PlotOpt = None, as_json: JsonOpt = False, pool: PoolOpt = False, judge: JudgeOpt = None,
           judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None, cache: CacheOpt = True) -> None:
    """Gold evidence found by search iteration; recovery after a first-query miss (MADQA H.5, Figures 22-23)."""
    from deskbench.tracks.docqa.analysis.trajectories import load_trajectories, trajectories_figure

    _wanted(output, as_json)
    _deliver(load_trajectories(run_dirs, pool, judging_of(judge, judge_concurrency, judge_cache, cache)), trajectories_figure, _trajectories_lines, output, plot, as_json)


def _cost_lines(report: Any) -> Iterator[str]:
    from deskbench.models.prices import format_cost

    for s in report.systems:
        acc = "-" if s.accuracy is None else f"{100 * s.accuracy:.1f}%"
        what = s.reason if s.reason and s.reason.startswith("not computable") else f"cost {format_cost(s.cost_usd)}"
        yield f"{s.system}: accuracy {acc}, {what} over {s.n} episodes"
    yield f"prices as of {report.prices_as_of}"


def cost(run_dirs: RunDirsArg, output: OutOpt = None, plot: PlotOpt = None, as_json: JsonOpt = False, pool: PoolOpt = False, judge: JudgeOpt = None,
           judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None, cache: CacheOpt = True) -> None:
    """Accuracy against the USD cost of each system (MADQA Figure 7); an unknown cost is '?', never $0."""
    from deskbench.tracks.docqa.analysis.cost import cost_figure, load_cost

    _wanted(output, as_json)
    _deliver(load_cost(run_dirs, pool, judging_of(judge, judge_concurrency, judge_cache, cache)), cost_figure, _cost_lines, output, plot, as_json)


def _human_time_lines(report: Any) -> Iterator[str]:
    for s in report.systems:
        if s.reason:
            yield f"{s.system}: {s.reason}"
            continue
        bins = ", ".join(f"{b.bin} min {_num(b.accuracy and 100 * b.accuracy, '{:.0f}%')} (n={b.n})" for b in s.bins)
        yield (f"{s.system}: median {s.median_minutes:.1f} min, mean {s.mean_minutes:.1f}, IQR {s.q1_minutes:.1f}-"
               f"{s.q3_minutes:.1f}; accuracy by time: {bins}")


def human_time(run_dirs: RunDirsArg, output: OutOpt = None, plot: PlotOpt = None, as_json: JsonOpt = False, pool: PoolOpt = False, judge: JudgeOpt = None,
           judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None, cache: CacheOpt = True) -> None:
    """People's response time against accuracy: median, quartiles, accuracy by time bin (MADQA §5.2)."""
    from deskbench.tracks.docqa.analysis.human_time import human_time_figure, load_human_time

    _wanted(output, as_json)
    _deliver(load_human_time(run_dirs, pool, judging_of(judge, judge_concurrency, judge_cache, cache)), human_time_figure, _human_time_lines, output, plot, as_json)


def _corpus_lines(stats: Any) -> Iterator[str]:
    yield (f"{stats.documents} documents, {stats.pages} pages (median {_num(stats.median_pages, '{:g}')}, mean "
           f"{_num(stats.mean_pages, '{:.1f}')}, max {stats.max_pages}), {stats.questions} questions in "
           f"{len(stats.by_domain)} domains and {len(stats.by_category)} categories")
    if stats.missing_documents:
        yield (f"{len(stats.missing_documents)} evidence documents are not in the corpus (counted in no row), "
               f"e.g. {stats.missing_documents[0]}")
    if stats.mixed_labels:
        yield (f"{len(stats.mixed_labels)} documents are cited by questions of different domains or categories "
               "(each takes the majority)")


def corpus_stats(tasks: TasksOpt, corpus: CorpusOpt, output: OutOpt = None, plot: PlotOpt = None, as_json: JsonOpt = False) -> None:
    """Documents, pages and questions by domain and by document category (MADQA Tables 2 and 6)."""
    from deskbench.tracks.docqa.analysis.corpus_stats import corpus_figure, load_corpus_stats

    _wanted(output, as_json)
    _deliver(load_corpus_stats(tasks, corpus), corpus_figure, _corpus_lines, output, plot, as_json)


def register(app: typer.Typer) -> None:
    """Add the commands to the `analyse` sub-app."""
    app.command("effort")(effort)
    app.command("failures")(failures)
    app.command("trajectories")(trajectories)
    app.command("cost")(cost)
    app.command("human-time")(human_time)
    app.command("corpus-stats")(corpus_stats)
