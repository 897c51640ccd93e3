"""The one `score` command: a run is scored by its track; a predictions file is docqa."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.common import JsonOpt
from deskbench.cli.settings import (
    CacheOpt,
    CapabilitiesOpt,
    JudgeCacheOpt,
    JudgeConcurrencyOpt,
    JudgeMaxTokensOpt,
    JudgeReasoningEffortOpt,
    JudgeTemperatureOpt,
    JudgeTopPOpt,
    scorer_params,
    use_model_flags,
)
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `score`."""
    for command in (score,):
        app.command()(command)


def score(
    ctx: typer.Context,
    submissions: Annotated[Path, typer.Argument(help="Predictions JSONL (deskbench or official MADQA format), or a run directory.")],
    tasks: Annotated[Path | None, typer.Option("--tasks", "-t", help="Tasks JSONL (MADQA dataset rows); a run knows its own.")] = None,
    system: Annotated[list[str] | None, typer.Option("--system", help="In a run directory: score only these systems (repeat; 'human' pools every annotator).")] = None,
    pool_humans: Annotated[bool, typer.Option("--pool-humans", help="docqa run: one 'human' row for every annotator's human:NAME episodes (earliest answer per question).")] = False,
    by: Annotated[list[str] | None, typer.Option("--by", help="Also break down by: domain, category.")] = None,
    official: Annotated[bool, typer.Option(help="The official MADQA evaluator's numbers (docs/fidelity.md): tasks without a prediction not counted, error rows and failed judge calls 0, Kuiper on len(search_history) else iterations (effort > 0, file order), pages as written, the official interval; adds 'official_metrics' to --json.")] = False,
    kuiper_ties: Annotated[str, typer.Option(help="robust (tied efforts are one block) | stable (input order)")] = "robust",
    effort: Annotated[str, typer.Option(help="Effort for Kuiper: steps | tokens | seconds")] = "steps",
    skip_invalid: Annotated[bool, typer.Option(help="Skip (and count) bad lines instead of stopping.")] = False,
    items_out: Annotated[Path | None, typer.Option("--items-out", help="Write per-item scores as JSONL.")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM judge model, e.g. openai/gpt-5-mini (else ANLS* >= 0.5).")] = None,
    judge_cache: JudgeCacheOpt = None,
    cache: CacheOpt = True,
    concurrency: JudgeConcurrencyOpt = 16,
    q0: Annotated[float | None, typer.Option(help="Judge specificity, for bias correction [default: 1.0].")] = None,
    q1: Annotated[float | None, typer.Option(help="Judge sensitivity, for bias correction [default: 0.98].")] = None,
    m0: Annotated[int | None, typer.Option(help="Calibration items judged incorrect by humans [default: 48].")] = None,
    m1: Annotated[int | None, typer.Option(help="Calibration items judged correct by humans [default: 152].")] = None,
    judge_calibration: Annotated[Path | None, typer.Option(help="q0, q1, m0, m1 from 'deskbench calibrate compute --json' output.")] = None,
    chart_judge: Annotated[str | None, typer.Option(help="analytics runs: vision judge for charts (default: --judge).")] = None,
    file_judge: Annotated[str | None, typer.Option("--file-judge", help="analytics runs: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.")] = None,
    file_judge_all: Annotated[bool | None, typer.Option("--file-judge-all/--file-judge-deferred", help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).")] = None,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
    scorer: Annotated[str | None, typer.Option("--scorer", help="A run directory: score with a plugin scorer (an installed one's name, see deskbench list scorers, or package.module:Name) instead of the track's own.")] = None,
    reviewed_only: Annotated[bool, typer.Option("--reviewed-only", help="deliverables runs: count only rubric grades a QC reviewer has reviewed (the paper's protocol, Appendix C); by default every usable grade counts and the share reviewed is shown.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Score a run or a predictions file. docqa: accuracy (ANLS* or an LLM judge), Page/Doc F1,
    Kuiper, by hop type. analytics runs: pass@1, pass@k, avg@k by category and difficulty.
    deliverables runs: the consulting paper's tables. A run is scored by its track. --json: a run
    gives {system: report} (one system or many; deliverables: its tables over every system), a
    predictions file one report."""
    from deskbench.contract.registry import get_track
    from deskbench.models.registry import preflight
    from deskbench.runs.outcomes import show_scores
    from deskbench.runs.store import RunStore
    from deskbench.runs.track import RunRequest
    from deskbench.runs.track_options import check_options, given_flags
    from deskbench.tracks.docqa.score_command import DocQAScoreArgs, score_predictions

    if not submissions.exists():  # a typo is named as one, before --tasks is asked for
        from deskbench.errors import no_such_file
        from deskbench.nearby import is_run
        from deskbench.paths import missing

        if submissions.suffix.lower() in (".jsonl", ".json"):
            raise no_such_file(submissions, "the predictions file")
        raise missing(submissions, is_run, "run directories",
                      "give a run directory (the --out of 'deskbench run') or a predictions file")
    store = RunStore(submissions, create=False) if submissions.is_dir() else None
    check_options("score", store.track() if store else "docqa", given_flags(ctx, "score"))  # a predictions file is docqa
    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    for name in (judge, chart_judge, file_judge):  # keys and settings before any scoring
        if name:
            preflight(name, role="judge")
    if concurrency < 1:
        raise UserError(f"--judge-concurrency {concurrency} is not valid; use 1 or more")
    params = scorer_params(ctx.params)
    if store is None and scorer is not None:
        raise UserError(f"--scorer scores a run directory; {submissions} is a file: give the run's folder")
    if store is None:
        score_predictions(submissions, DocQAScoreArgs.of(params), as_json=as_json)
        return
    if scorer is not None:
        from deskbench.scoring.plugin_scores import show_plugin_scores

        show_plugin_scores(store, scorer, system or store.systems(), as_json=as_json)
    else:
        request = RunRequest(tasks=submissions, out=store.dir, judge=judge, concurrency=concurrency, options=params)
        show_scores(get_track(store.track()), store, system or store.systems(), request, as_json=as_json)
    if store.skipped:  # each was named on stderr when read (store.episodes): the count, for every track
        from deskbench.console import err

        n = len(store.skipped)
        err.print(f"{n} episode{'s' if n != 1 else ''} could not be read and {'are' if n != 1 else 'is'} left out of "
                  "the scores (not counted as wrong, not counted at all); 'deskbench run --retry-errors' runs "
                  f"{'them' if n != 1 else 'it'} again")
