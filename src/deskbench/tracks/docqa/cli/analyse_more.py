"""`deskbench analyse drift | guessability | multihop | lexical`: thin shells over the analysis
modules of the same names. Each writes its pydantic report as JSON (the model is the schema) and,
where offered, a PNG plot. `register` adds them to the `analyse` sub-app. The judge flags every
command that scores answers takes (`--judge` ...) and the line saying what scored them are here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deskbench.cli.settings import CacheOpt, JudgeCacheOpt, JudgeConcurrencyOpt
from deskbench.errors import UserError

if TYPE_CHECKING:  # type hints only: `deskbench --help` starts without pydantic
    from pydantic import BaseModel

    from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging

RunDirsArg = Annotated[list[Path], typer.Argument(metavar="RUNDIR...", help="Run directories (deskbench run --out).")]
RunDirArg = Annotated[Path, typer.Argument(metavar="RUNDIR", help="Run directory (deskbench run --out).")]
OutOpt = Annotated[Path, typer.Option("--output", help="JSON report to write.")]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Also write a PNG plot here.")]
CorpusOpt = Annotated[Path, typer.Option("--corpus", "-c", help="Corpus directory.")]
TasksOpt = Annotated[Path, typer.Option("--tasks", "-t", help="docqa tasks JSONL.")]
JudgeOpt = Annotated[str | None, typer.Option(
    "--judge", help="Decide correctness with this LLM judge as MADQA H.3 does (score >= 0.5 is correct), reusing "
                    "the verdicts a 'deskbench score --judge' with the same judge stored in the run (default: "
                    "ANLS* >= 0.5, no judge).")]


EmbeddingOpt = Annotated[str | None, typer.Option(
    "--embedding", help="Embed texts with this sentence-transformers model (a folder or a hub name in the local "
                        "Hugging Face cache), or 'tfidf' / 'minilm'. Default: the paper's "
                        "Snowflake/snowflake-arctic-embed-m-v2.0 when it is installed, else TF-IDF (named in the output).")]
EmbeddingDownloadOpt = Annotated[bool, typer.Option(
    "--embedding-download", help="Allow fetching the --embedding model (or the paper's) from the Hugging Face hub.")]


def judging_of(judge: str | None, concurrency: int = 16, judge_cache: Path | None = None, cache: bool = True) -> Judging:
    """The scorer of an analysis from its flags: ANLS*, or the judge (opened when a verdict is missing)."""
    from deskbench.tracks.docqa.analysis.judged import Judging

    if concurrency < 1:
        raise UserError(f"--judge-concurrency {concurrency} is not valid; use 1 or more")
    return Judging(spec=judge or None, concurrency=concurrency, cache=judge_cache, no_cache=not cache)


def say_scoring(scoring: AnalysisScoring | None) -> None:
    """What decided correctness, on stderr: ANLS* named, or the judge with its verdicts' origin."""
    if scoring is not None:
        typer.echo(scoring.line(), err=True)


def write_report(path: Path, report: BaseModel) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}; choose another --output path") from exc


def _say(text: str) -> None:
    typer.echo(text, err=True)


def drift(
    run_dirs: RunDirsArg, output: OutOpt, plot: PlotOpt = None,
    method: Annotated[str | None, typer.Option(help="tfidf | minilm: all-MiniLM-L6-v2 sentence embeddings (the embeddings extra, see docs/results.md); the same as --embedding NAME")] = None,
    embedding: EmbeddingOpt = None, embedding_download: EmbeddingDownloadOpt = False,
    judge: JudgeOpt = None, judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
) -> None:
    """Query reformulation: cosine drift between consecutive search queries (MADQA H.6)."""
    from deskbench.tracks.docqa.analysis.drift import (
        METHODS,
        load_drift,
        method_embedder,
        plot_drift,
    )
    from deskbench.tracks.docqa.analysis.embedding_choice import choose_embedding

    if method is not None and embedding is not None:
        raise UserError("give --embedding or --method, not both (--method NAME is --embedding NAME)")
    if method is not None and method not in METHODS:
        method_embedder(method)  # its one line naming the valid methods
    choice = choose_embedding(method or embedding, allow_download=embedding_download)
    report = load_drift(run_dirs, judging=judging_of(judge, judge_concurrency, judge_cache, cache), embedding=choice)
    write_report(output, report)
    if plot is not None:
        plot_drift(report, plot)
    for s in report.systems:
        d = "-" if s.mean_drift is None else f"{s.mean_drift:.3f}"
        r = "-" if s.point_biserial_r is None else f"{s.point_biserial_r:+.2f}"
        _say(f"{s.system}: mean drift {d} ({report.method}) over {s.reformulated}/{s.episodes} reformulated episodes, r(drift, correct) {r}")
    _say(choice.used.line())
    say_scoring(report.scoring)
    _say(f"wrote {output}" + (f" and {plot}" if plot else ""))


def guessability(
    run_dir: RunDirArg, output: OutOpt,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Classify the questions with this model (MADQA Prompt 2) instead of patterns.")] = None,
    judge: JudgeOpt = None, judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
) -> None:
    """Accuracy without documents by question type: yes/no, binary choice, other (MADQA E.2)."""
    from deskbench.tracks.docqa.analysis.guessability import load_guessability

    judging = judging_of(judge, judge_concurrency, judge_cache, cache)
    chat = None
    if model:
        from deskbench.models.registry import open_model

        chat = open_model(model, role="judge", concurrency=16, cache=True)
    report = load_guessability(run_dir, chat, judging)
    if report.pattern_fallbacks:
        _say(f"{len(report.pattern_fallbacks)} questions the model could not classify were classified by patterns")
    write_report(output, report)
    for s in report.systems:
        _say(f"{s.system}: guessability {100 * s.guessability:.1f}% (random {100 * s.random:.1f}%, "
             f"memorised {100 * s.contamination:.1f}%) over {s.questions} questions")
    say_scoring(report.scoring)
    _say(f"wrote {output}")


def multihop(run_dir: RunDirArg, corpus: CorpusOpt, output: OutOpt, plot: PlotOpt = None,
             embedding: EmbeddingOpt = None, embedding_download: EmbeddingDownloadOpt = False, judge: JudgeOpt = None,
             judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None, cache: CacheOpt = True) -> None:
    """Multi-hop accuracy by page gap and by semantic distance of the evidence pages (MADQA H.1)."""
    from deskbench.tracks.docqa.analysis.embedding_choice import choose_embedding
    from deskbench.tracks.docqa.analysis.multihop import load_multihop, plot_multihop

    choice = choose_embedding(embedding, allow_download=embedding_download)
    report = load_multihop(run_dir, corpus, judging_of(judge, judge_concurrency, judge_cache, cache), choice)
    write_report(output, report)
    if plot is not None:
        plot_multihop(report, plot)
    _say(choice.used.line())
    say_scoring(report.scoring)
    _say(f"{len(report.items)} multi-hop items, {len(report.systems)} system row(s); wrote {output}"
         + (f" and {plot}" if plot else ""))


def lexical(tasks: TasksOpt, corpus: CorpusOpt, output: OutOpt) -> None:
    """n-gram overlap between questions and their evidence; Ctrl+F precision and recall (MADQA E.1)."""
    from deskbench.tracks.docqa.analysis.lexical import load_lexical

    report = load_lexical(tasks, corpus)
    write_report(output, report)
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    for s in report.summary:
        _say(f"{s.n}-grams: overlap {pct(s.mean_overlap)}, median pages {s.median_pages}, "
             f"precision {pct(s.precision)}, recall {pct(s.recall)}")
    _say(f"wrote {output}")


def register(app: typer.Typer) -> None:
    """Add the four commands to the `analyse` sub-app."""
    app.command("drift")(drift)
    app.command("guessability")(guessability)
    app.command("multihop")(multihop)
    app.command("lexical")(lexical)
