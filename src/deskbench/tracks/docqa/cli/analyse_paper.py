"""`deskbench analyse modality | gold-check`: MADQA's visual-modality classifier (E.3, Prompt 3,
Table 10) and its oracle gold-answer check (§2.2), thin shells over analysis/modality.py and
analysis/gold_check.py. Each writes its pydantic report as JSON to --output and/or, with --json, to
stdout, and prints its summary on stderr. `register` adds them to the `analyse` sub-app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.settings import CacheOpt, JudgeCacheOpt, JudgeConcurrencyOpt
from deskbench.errors import UserError
from deskbench.tracks.docqa.cli.analyse_more import (
    CorpusOpt,
    JudgeOpt,
    RunDirArg,
    judging_of,
    say_scoring,
    write_report,
)

OutOpt = Annotated[Path | None, typer.Option("--output", help="JSON report to write.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the JSON report on stdout.")]


def _say(text: str) -> None:
    typer.echo(text, err=True)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _wanted(output: Path | None, as_json: bool) -> None:
    if output is None and not as_json:
        raise UserError("say where the report goes: --output FILE.json, or --json to print it")


def modality(
    run_dir: RunDirArg, corpus: CorpusOpt,
    model: Annotated[str, typer.Option("--model", "-m", help="The classifier: a chat model that reads images (the paper: Gemini 3 Flash).")],
    output: OutOpt = None, as_json: JsonOpt = False,
    dpi: Annotated[int, typer.Option("--dpi", min=36, max=600, help="Resolution of the evidence page images shown to the classifier.")] = 150,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Classifier calls at once.")] = 16,
    judge: JudgeOpt = None, judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
) -> None:
    """Visual modality each question needs (MADQA E.3: Prompt 3 on the question, gold answer and gold
    page images; Table 10's categories) and each system's accuracy by it. Labels are kept in the run."""
    from deskbench.models.registry import open_model
    from deskbench.tracks.docqa.analysis.modality import load_modality

    _wanted(output, as_json)
    judging = judging_of(judge, judge_concurrency, judge_cache, cache)
    chat = open_model(model, role="judge", concurrency=concurrency, cache=cache)
    report = load_modality(run_dir, corpus, chat, dpi, judging)
    if output is not None:
        write_report(output, report)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    n = len(report.labels)
    _say(f"{n} questions classified by {report.classifier} ({report.reused} labels reused from the run, "
         f"{report.asked} asked now); " + ", ".join(f"{c.category} {c.count} ({_pct(c.share)})" for c in report.distribution)
         + f"; requires visual/structure {_pct(report.requires_visual.share)}, multiple categories {_pct(report.multiple.share)}")
    if report.unclassified:
        first = next(iter(report.unclassified.items()))
        _say(f"{len(report.unclassified)} questions unclassified (in no row), e.g. {first[0]}: {first[1]}")
    for s in report.systems:
        _say(f"{s.system}: accuracy {_pct(s.accuracy)} over {s.n}; "
             + ", ".join(f"{c.category} {_pct(c.accuracy)} (n={c.n})" for c in s.by_category))
    say_scoring(report.scoring)
    if output is not None:
        _say(f"wrote {output}")


def gold_check(
    run_dir: RunDirArg, output: OutOpt = None, as_json: JsonOpt = False,
    system: Annotated[list[str] | None, typer.Option("--system", help="Check against this system's answers instead of the run's oracle systems (repeatable), e.g. human-oracle.")] = None,
    judge: JudgeOpt = None, judge_concurrency: JudgeConcurrencyOpt = 16, judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
) -> None:
    """Tasks whose gold answer the oracle (a model given the gold pages: deskbench run --agent oracle)
    disagrees with, for a manual check (MADQA §2.2); and tasks no system answered correctly."""
    from deskbench.tracks.docqa.analysis.gold_check import load_gold_check

    _wanted(output, as_json)
    report = load_gold_check(run_dir, system or (), judging_of(judge, judge_concurrency, judge_cache, cache))
    if output is not None:
        write_report(output, report)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    for o in report.oracles:
        ids = ", ".join(f.id for f in o.flagged[:10]) + (", ..." if len(o.flagged) > 10 else "")
        unchecked = len(o.not_answered) + len(o.unscored)
        _say(f"{o.system}: {len(o.flagged)} of {o.checked} gold answers flagged for a manual check"
             + (f" ({ids})" if o.flagged else "") + (f"; {unchecked} tasks unchecked (no answer or no verdict)" if unchecked else ""))
    _say(f"{len(report.unsolved)} tasks no system of the run answered correctly")
    say_scoring(report.scoring)
    if output is not None:
        _say(f"wrote {output}")


def register(app: typer.Typer) -> None:
    """Add the two commands to the `analyse` sub-app."""
    app.command("modality")(modality)
    app.command("gold-check")(gold_check)
