"""The one `score` command: a run is scored by its track; a predictions file is docqa."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deskbench.cli import batch_flag
from deskbench.cli.batch_flag import HELP_SCORE
from deskbench.cli.common import JsonOpt
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
from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.contract.track import Track


def register(app: typer.Typer) -> None:
    """Add `score`."""
    app.command(name="score")(with_track_flags(score, "score", after="system"))


def score(
    ctx: typer.Context,
    submissions: Annotated[Path, typer.Argument(help="Predictions JSONL (deskbench or official MADQA format), or a run directory.")],
    system: Annotated[list[str] | None, typer.Option("--system", help="In a run directory: score only these systems (repeat; 'human' pools every annotator).")] = None,
    items_out: Annotated[Path | None, typer.Option("--items-out", help="Write per-item scores as JSONL.")] = None,
    judge: Annotated[list[str] | None, typer.Option(help="LLM judge model, e.g. openai/gpt-5-mini (else ANLS* >= 0.5); repeat to score with each and compare them (agreement, disagreements, ranking).")] = None,
    concurrency: JudgeConcurrencyOpt = 16,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
    scorer: Annotated[str | None, typer.Option("--scorer", help="A run directory: score with a plugin scorer (an installed one's name, see deskbench list scorers, or package.module:Name) instead of the track's own.")] = None,
    batch: Annotated[bool, typer.Option("--batch-api", help=HELP_SCORE)] = False,
    as_json: JsonOpt = False,
) -> None:
    """Score a run or a predictions file. docqa: accuracy (ANLS* or an LLM judge), Page/Doc F1,
    Kuiper, by hop type. analytics runs: pass@1, pass@k, avg@k by category and difficulty.
    deliverables runs: the consulting paper's tables. A run is scored by its track. --json: a run
    gives {system: report} (one system or many; deliverables: its tables over every system), a
    predictions file one report."""
    from deskbench.contract.registry import get_track
    from deskbench.runs.store import RunStore
    from deskbench.runs.track import RunRequest
    from deskbench.runs.track_options import (
        check_options,
        given_flags,
        preflight_judges,
        track_options,
    )
    from deskbench.runs.track_outcomes import show_scores

    if not submissions.exists():  # a typo is named as one, before --tasks is asked for
        from deskbench.errors import no_such_file
        from deskbench.nearby import is_run
        from deskbench.paths import missing

        if submissions.suffix.lower() in (".jsonl", ".json"):
            raise no_such_file(submissions, "the predictions file")
        raise missing(submissions, is_run, "run directories",
                      "give a run directory (the --out of 'deskbench run') or a predictions file")
    store = RunStore(submissions, create=False) if submissions.is_dir() else None
    track = get_track(store.track()) if store else _file_track(submissions)
    check_options("score", track.name, given_flags(ctx, "score"))
    options = track_options("score", track, ctx.params)
    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    judges = list(judge or [])
    named: list[str | None] = [*judges] or [None]
    for name in named:
        preflight_judges(name, options)  # keys and settings before any scoring (the track's own judges too)
    if len(judges) > 1:
        from deskbench.scoring.judge_agreement import check_judges

        check_judges(judges, run_dir=store is not None, items_out=items_out is not None, scorer=scorer is not None)
    one_judge = judges[0] if len(judges) == 1 else None
    if concurrency < 1:
        raise UserError(f"--judge-concurrency {concurrency} is not valid; use 1 or more")
    if store is None and scorer is not None:
        raise UserError(f"--scorer scores a run directory; {submissions} is a file: give the run's folder")
    if batch:
        if store is None:
            raise UserError(f"--batch-api scores a run directory (its batches are kept in the run store, so a killed "
                            f"score resumes them); {submissions} is a file: give the run's folder or drop --batch-api")
        batch_flag.check(batch_flag.names(judge), what="judge")
        concurrency = batch_flag.run_concurrency(ctx, batch, concurrency)
    batches = batch_flag.start(ctx, batch, ("judge",), store)  # judges opened from here on batch their calls
    if store is None:
        track.score_file(submissions, RunRequest(tasks=submissions, out=submissions, judge=one_judge, concurrency=concurrency,
                                                 options=options, capabilities=capabilities, items_out=items_out),
                         as_json=as_json)
        return
    if scorer is not None:
        from deskbench.scoring.plugin_scores import show_plugin_scores

        show_plugin_scores(store, scorer, system or store.systems(), as_json=as_json)
    else:
        request = RunRequest(tasks=submissions, out=store.dir, judge=one_judge, concurrency=concurrency, options=options,
                             capabilities=capabilities, items_out=items_out)
        if len(judges) > 1:
            from deskbench.scoring.judge_agreement import score_with_judges

            score_with_judges(track, store, system or store.systems(), judges, request, as_json=as_json)
        else:
            show_scores(track, store, system or store.systems(), request, as_json=as_json)
    batch_flag.finish(batches, store)
    if store.skipped:  # each was named on stderr when read (store.episodes): the count, for every track
        from deskbench.console import err

        n = len(store.skipped)
        err.print(f"{n} episode{'s' if n != 1 else ''} could not be read and {'are' if n != 1 else 'is'} left out of "
                  "the scores (not counted as wrong, not counted at all); 'deskbench run --retry-errors' runs "
                  f"{'them' if n != 1 else 'it'} again")


def _file_track(path: Path) -> Track:
    """The track that scores a predictions file (`Track.scores_files`: docqa's MADQA predictions)."""
    from deskbench.contract.registry import tracks

    found = next((t for t in tracks().values() if t.scores_files), None)
    if found is None:
        raise UserError(f"{path} is a file, and no installed track scores a predictions file; give a run directory")
    return found
