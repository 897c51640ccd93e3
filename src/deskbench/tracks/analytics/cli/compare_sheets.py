"""`deskbench compare-sheets REFERENCE PREDICTED`: the spreadsheet file evaluator as a command.

Exit codes: 0 when the prediction passes, 1 when it fails (at any stage, "open" included), 2
for a user error (a missing file, a reference that does not open).

With `--file-judge MODEL`, what the comparator cannot decide (it cannot read the reference, or
the prediction's format: sheets.compare_or_defer) goes to the agentic File Judge (Listing 5,
tracks/analytics/scoring/file_judge.py) instead; its verdict exits 0 or 1 as above, and a judge that could not
score (a failed model call, no valid verdict) exits 3.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.tracks.analytics.scoring.file_judge import FileJudge, FileJudgeRecord

UNSCORED_EXIT = 3
_out = Console(highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the top-level `compare-sheets` command to `app`."""

    @app.command("compare-sheets")
    def compare_sheets_cmd(
        reference: Annotated[Path, typer.Argument(help="The reference file (xlsx, xlsm or csv).")],
        predicted: Annotated[Path, typer.Argument(help="The file to judge (xlsx, xlsm or csv).")],
        instruction: Annotated[str, typer.Option("--instruction", help="The task instruction: decides strictness and constraints (sort, dedup, filters, top-K).")] = "",
        strict: Annotated[bool | None, typer.Option("--strict/--tolerant", help="Force strict or tolerant structure matching (default: from the instruction).")] = None,
        sample_n: Annotated[int, typer.Option("--sample-n", help="Rows per sample region (head/middle/tail/random) for sheets of 200+ rows.")] = 30,
        seed: Annotated[int, typer.Option(help="Seed of the random sample rows.")] = 0,
        as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON (pass, stage, reason, mode, checked, constraints).")] = False,
        file_judge: Annotated[str | None, typer.Option("--file-judge", help="A model for the agentic File Judge (AIDABench Listing 5: sandboxed code, at most 20 calls), used only when the comparator cannot read a file (exit 3: it could not score).")] = None,
    ) -> None:
        """Judge a produced spreadsheet against a reference: structure, content, task constraints (exit 0 pass, 1 fail)."""
        from deskbench.tracks.analytics.scoring.sheets import compare_or_defer

        for label, path in (("reference", reference), ("predicted", predicted)):
            if not path.is_file():
                raise UserError(f"{label} file {path} does not exist; give the path of an xlsx, xlsm or csv file")
        if sample_n < 1:
            raise UserError(f"--sample-n {sample_n} is not valid; use 1 or more")
        outcome = compare_or_defer(reference, predicted, instruction=instruction, strict=strict,
                                   sample_n=sample_n, seed=seed)
        if outcome.undecided and file_judge:
            _judged(_run_judge(file_judge, instruction, reference, predicted, outcome.undecided), as_json)
            return
        if outcome.verdict is None:
            raise UserError(f"{outcome.reference_error}; check the reference file (or give --file-judge MODEL)")
        result = outcome.verdict
        if as_json:
            _out.print_json(result.model_dump_json(by_alias=True))
        elif result.passed:
            _out.print("PASS")
        else:
            _out.print(f"FAIL at {result.stage}: {escape(result.reason)}")
        if not result.passed:
            raise typer.Exit(1)


def _run_judge(model_name: str, instruction: str, reference: Path, predicted: Path, deferred: str) -> FileJudgeRecord:
    """One File Judge verdict; the model and the sandbox are closed after it."""
    import asyncio

    from deskbench.tracks.analytics.score_command import close_judges, file_judge_for
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges
    from deskbench.tracks.analytics.scoring.file_judge import task_question

    judge: FileJudge | None = file_judge_for(model_name, 1)
    assert judge is not None
    try:
        return asyncio.run(judge.judge(task_question(instruction), reference, predicted, deferred=deferred))
    finally:
        close_judges(AnalyticsJudges(file=judge))


def _judged(record: FileJudgeRecord, as_json: bool) -> None:
    """Print the File Judge's verdict; exit 1 for a fail, 3 when it could not score."""
    passed = record.is_correct if record.status == "scored" else None
    if as_json:
        _out.print_json(data={"pass": passed, "status": record.status, "source": "file_judge",
                              "reason": record.reason, "deferred": record.deferred,
                              "file_judge": record.model_dump(mode="json")})
    else:
        _out.print(f"the comparator cannot decide ({escape(record.deferred)}); the file judge {escape(record.model)} "
                   f"ran {record.execute_calls} execute_code call(s)")
        if passed is None:
            _out.print(f"UNSCORED: {escape(record.reason)}" + (f": {escape(record.error)}" if record.error else ""))
        else:
            _out.print(f"{'PASS' if passed else 'FAIL'} (file judge): {escape(record.reason)}")
    if passed is None:
        raise typer.Exit(UNSCORED_EXIT)
    if not passed:
        raise typer.Exit(1)
