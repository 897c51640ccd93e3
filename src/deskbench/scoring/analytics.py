"""Score analytics episodes (AIDABench §3.3): each category goes to its evaluator.

- qa: the deterministic numeric check, then the binary judge (Listing 2) when one is given;
- visualization: the chart among the output files, scored by the vision judges (Listings 3, 4)
  as S = 0.7 C + 0.3 R, plus the missing-glyph check on the sandbox's warnings;
- file_generation: the named output file against the reference by the three-stage comparator;
  what it cannot decide (it cannot read the reference, or the prediction's format) goes to the
  agentic File Judge (Listing 5, scoring/file_judge.py) when one is given (`--file-judge`);
  without one the comparator's own outcome stands (a prediction it cannot read fails at "open";
  a reference that does not open stops the scoring with a UserError: the task is broken).

An episode that ended in an error or at the round limit scores 0 (as the paper counts a round-
limit exception); an evaluator that could not decide (no judge, a judge that failed) leaves the
episode "unscored", kept apart from wrong.

Each failure gets one of the paper's bad-case categories (§4.4), deterministically:
round_limit (the episode hit the execute_code budget), garbled_text (a chart with non-Latin
labels drawn with missing glyphs), calculation (a QA answer whose numbers disagree with the
reference; a file whose structure is right but whose values differ), semantic (a QA answer
judged wrong without a numeric disagreement; a chart missing rubric items; a file with the wrong
structure or that breaks the instruction's constraints), other (no answer or no output file,
an agent error, a file the File Judge rejected: its reason is prose, and no rule tells a
calculation error from a semantic one there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.models.types import ChatModel
from deskbench.runs.store import Episode, RunStore
from deskbench.scoring.file_judge import FileJudgeRecord
from deskbench.tasks.analytics import AnalyticsSubmission, AnalyticsTask, Category, Difficulty

if TYPE_CHECKING:
    from deskbench.scoring.file_judge import FileJudge

ErrorCategory = Literal["calculation", "semantic", "round_limit", "garbled_text", "other"]
ERROR_CATEGORIES: tuple[ErrorCategory, ...] = ("calculation", "semantic", "round_limit", "garbled_text", "other")
SHEET_SUFFIXES = (".xlsx", ".xlsm", ".csv")


class AnalyticsItemScore(BaseModel):
    """One episode's score, written with `--items-out` and re-read by the report."""

    task_id: str
    attempt: int
    system: str
    category: Category
    difficulty: Difficulty
    status: Literal["scored", "unscored"]
    score: float | None  # 0/1 for qa and files; S in [0, 1] for charts
    source: str  # which evaluator decided: numeric, exact, judge, chart_judge, comparator, file_judge, episode
    reason: str = ""
    error_category: ErrorCategory | None = None  # for failed episodes (score < 1)
    glyph_check: str | None = None  # charts: pass / fail / unobservable / not_applicable
    rounds: int = 0
    tokens: int = 0  # input + output, kept for items files written before the split
    input_tokens: int = 0  # prompt tokens over the episode's model calls (each call resends the history)
    # completion tokens: Appendix H's per-task 2.2k-13.2k can only be these (a 20-round history resends far more)
    output_tokens: int = 0
    episode_status: str = "ok"
    file_judge: FileJudgeRecord | None = None  # files the comparator deferred: the judge's verdict and trajectory


@dataclass(frozen=True)
class AnalyticsJudges:
    """The models behind the judged evaluators; None leaves what only they decide unscored."""

    qa: ChatModel | None = None
    chart: ChatModel | None = None
    file: FileJudge | None = None  # only for files the comparator cannot decide


def _output_paths(sub: AnalyticsSubmission, run_dir: Path) -> list[Path]:
    base = run_dir / sub.files_dir
    return [base / f.name for f in sub.files if (base / f.name).is_file()]


def find_output_sheet(task: AnalyticsTask, paths: Sequence[Path]) -> Path | None:
    """The file the instruction asked for by name; failing that, the only spreadsheet produced."""
    assert task.reference_file is not None
    wanted = task.reference_file.output_name.lower()
    named = [p for p in paths if p.name.lower() == wanted]
    if named:
        return named[0]
    sheets = [p for p in paths if p.suffix.lower() in SHEET_SUFFIXES]
    return sheets[0] if len(sheets) == 1 else None


async def score_episode(task: AnalyticsTask, ep: Episode, run_dir: Path, tasks_dir: Path,
                        judges: AnalyticsJudges) -> AnalyticsItemScore:
    sub = ep.submission if isinstance(ep.submission, AnalyticsSubmission) else None
    base = AnalyticsItemScore(
        task_id=task.id, attempt=ep.attempt, system=ep.system, category=task.category,
        difficulty=task.difficulty, status="scored", score=0.0, source="episode",
        rounds=sub.rounds if sub else 0, tokens=ep.usage.input_tokens + ep.usage.output_tokens,
        input_tokens=ep.usage.input_tokens, output_tokens=ep.usage.output_tokens,
        episode_status=ep.status)
    if ep.status != "ok" or sub is None:
        category: ErrorCategory = "round_limit" if ep.status == "limit" else "other"
        return base.model_copy(update={"reason": ep.error or "no submission", "error_category": category})
    paths = _output_paths(sub, run_dir)
    if task.category == "qa":
        return await _qa(task, sub, base, judges)
    if task.category == "visualization":
        return await _chart(task, sub, run_dir / sub.files_dir, paths, base, judges)
    return await _file(task, paths, base, tasks_dir, judges.file)


async def _qa(task: AnalyticsTask, sub: AnalyticsSubmission, base: AnalyticsItemScore,
              judges: AnalyticsJudges) -> AnalyticsItemScore:
    from deskbench.scoring.analytics_qa import score_qa

    if not sub.answer.strip():
        return base.model_copy(update={"reason": "no final answer", "error_category": "other"})
    v = await score_qa(task, sub.answer, judges.qa)
    if v.status != "scored" or v.score is None:
        return base.model_copy(update={"status": "unscored", "score": None, "source": v.source, "reason": v.reason})
    error: ErrorCategory | None = None
    if v.score < 1:
        error = "calculation" if v.reference_value is not None and v.answer_values else "semantic"
    return base.model_copy(update={"score": float(v.score), "source": v.source, "reason": v.reason,
                                   "error_category": error})


async def _chart(task: AnalyticsTask, sub: AnalyticsSubmission, files_dir: Path, paths: list[Path],
                 base: AnalyticsItemScore, judges: AnalyticsJudges) -> AnalyticsItemScore:
    from deskbench.scoring.charts import find_chart, score_chart

    chart = find_chart(paths, instruction=task.instruction)
    if chart is None:
        return base.model_copy(update={"reason": "no chart image among the output files", "error_category": "other"})
    name = chart.relative_to(files_dir).as_posix()
    # the log of the call that wrote this chart ("" when it warned nothing); none: unobservable
    logs = ["\n".join(sub.file_warnings[name])] if name in sub.file_warnings else []
    v = await score_chart(task, chart, judges.chart, stderr_logs=logs)
    garbled = v.glyph_check == "fail"
    if v.status != "scored" or v.score is None:
        return base.model_copy(update={
            "status": "unscored", "score": None, "source": "chart_judge", "glyph_check": v.glyph_check,
            "reason": v.reason, "error_category": "garbled_text" if garbled else None})
    error: ErrorCategory | None = None
    if garbled:
        error = "garbled_text"
    elif v.correctness is not None and v.correctness < 1:
        error = "semantic"
    return base.model_copy(update={"score": v.score, "source": "chart_judge", "reason": v.reason,
                                   "glyph_check": v.glyph_check, "error_category": error})


async def _file(task: AnalyticsTask, paths: list[Path], base: AnalyticsItemScore, tasks_dir: Path,
                judge: FileJudge | None) -> AnalyticsItemScore:
    from deskbench.scoring.file_judge import task_question
    from deskbench.scoring.sheets import compare_or_defer

    assert task.reference_file is not None
    produced = find_output_sheet(task, paths)
    if produced is None:
        names = ", ".join(p.name for p in paths) or "none"
        return base.model_copy(update={
            "reason": f"no output file {task.reference_file.output_name!r} (files produced: {names})",
            "error_category": "other"})
    reference = tasks_dir / task.reference_file.path
    outcome = compare_or_defer(reference, produced, instruction=task.instruction, key_points=task.key_points,
                               strict=task.reference_file.strict_structure)
    if outcome.undecided and judge is not None:
        record = await judge.judge(task_question(task.instruction, task.key_points), reference, produced,
                                   deferred=outcome.undecided)
        if record.status != "scored" or record.is_correct is None:
            reason = f"{record.reason}: {record.error}" if record.error else record.reason
            return base.model_copy(update={"status": "unscored", "score": None, "source": "file_judge",
                                           "reason": reason, "file_judge": record})
        return base.model_copy(update={
            "score": 1.0 if record.is_correct else 0.0, "source": "file_judge", "reason": record.reason,
            "error_category": None if record.is_correct else "other", "file_judge": record})
    if outcome.verdict is None:  # no judge: a reference that does not open stops the scoring, as it always has
        raise UserError(f"task {task.id}: {outcome.reference_error}; fix the task's reference file, or score "
                        "with --file-judge MODEL")
    result = outcome.verdict
    error: ErrorCategory | None = None
    if not result.passed:
        error = "calculation" if result.stage == "content" else "semantic"
    return base.model_copy(update={"score": 1.0 if result.passed else 0.0, "source": "comparator",
                                   "reason": f"{result.stage}: {result.reason}", "error_category": error})


async def score_run(store: RunStore, system: str, judges: AnalyticsJudges, *,
                    concurrency: int = 8) -> list[AnalyticsItemScore]:
    """Every episode of `system` in an analytics run, scored (judge calls `concurrency` at a time)."""
    tasks = {t.id: t for t in store.analytics_tasks()}
    tasks_file = store.meta("tasks_file")
    if not isinstance(tasks_file, str):
        raise UserError(f"{store.dir} does not record its tasks file; run 'deskbench run' on it again")
    tasks_dir = Path(tasks_file).parent
    slots = asyncio.Semaphore(concurrency)

    async def one(ep: Episode) -> AnalyticsItemScore:
        async with slots:
            return await score_episode(tasks[ep.task_id], ep, store.dir, tasks_dir, judges)

    episodes = [ep for ep in store.episodes(system) if ep.task_id in tasks]
    return list(await asyncio.gather(*(one(ep) for ep in episodes)))
