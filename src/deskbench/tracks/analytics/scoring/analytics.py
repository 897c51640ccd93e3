"""Score analytics episodes (AIDABench §3.3): each category goes to its evaluator.

- qa: the deterministic numeric check, then the binary judge (Listing 2) when one is given;
- visualization: the chart among the output files, scored by the vision judges (Listings 3, 4)
  as S = 0.7 C + 0.3 R, plus the missing-glyph check on the sandbox's warnings;
- file_generation: with a File Judge (`--file-judge MODEL`), the paper's protocol: every output
  file goes to the agentic File Judge (Listing 5, tracks/analytics/scoring/file_judge.py), and the deterministic
  three-stage comparator's verdict is kept beside it in the item (`comparator`) for audit, as the
  QA item keeps its check's. `--file-judge-deferred` is deskbench's cheaper mode: the comparator
  decides and only what it cannot (it cannot read the reference, or the prediction's format)
  goes to the File Judge. Without a File Judge the comparator decides alone (a prediction it
  cannot read fails at "open"; a reference that does not open stops the scoring with a
  UserError: the task is broken). Why --file-judge alone means every file: the flag names the
  paper's evaluator, so a user giving it expects the paper's numbers, as `--judge` sends every
  QA answer to the Listing 2 judge; the defer-only mode is an explicit, visible opt-out.

`AnalyticsItemScore.source` says which evaluator decided: "comparator"; "file_judge" (every file
to the File Judge, the paper's protocol); "file_judge_deferred" (the comparator could not read a
file and deferred to the File Judge); for QA "numeric" / "exact" / "judge" / "none"; for charts
"chart_judge"; "episode" for an episode that ended without a submission.

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

from pydantic import BaseModel, Field

from deskbench.errors import UserError
from deskbench.models.types import ChatModel
from deskbench.runs.protocol import ProtocolNote, deskbench, paper
from deskbench.runs.store import Episode, RunStore
from deskbench.scoring.judge_log import CHART_JUDGE, QA_JUDGE, episode, recorded
from deskbench.tracks.analytics.scoring.file_judge import FileJudgeRecord
from deskbench.tracks.analytics.scoring.sheets import SheetComparison
from deskbench.tracks.analytics.tasks import (
    AnalyticsSubmission,
    AnalyticsTask,
    Category,
    Difficulty,
    ReferenceFile,
)

if TYPE_CHECKING:
    from deskbench.tracks.analytics.scoring.analytics_qa import QAVerdict
    from deskbench.tracks.analytics.scoring.file_judge import FileJudge

ErrorCategory = Literal["calculation", "semantic", "round_limit", "garbled_text", "other"]
ERROR_CATEGORIES: tuple[ErrorCategory, ...] = ("calculation", "semantic", "round_limit", "garbled_text", "other")
SHEET_SUFFIXES = (".xlsx", ".xlsm", ".csv")


class OutputScore(BaseModel):
    """One requested file's verdict, in a task that asks for several (AnalyticsItemScore.outputs)."""

    output_name: str
    produced: str | None  # the file found under that name; None: not produced
    status: Literal["scored", "unscored"]
    score: float | None
    source: str
    reason: str = ""
    comparator: SheetComparison | None = None
    file_judge: FileJudgeRecord | None = None


class AnalyticsItemScore(BaseModel):
    """One episode's score, written with `--items-out` and re-read by the report."""

    task_id: str
    attempt: int
    system: str
    category: Category
    difficulty: Difficulty
    status: Literal["scored", "unscored"]
    score: float | None  # 0/1 for qa and files; S in [0, 1] for charts
    source: str  # which evaluator decided (see the module docstring): comparator, file_judge, file_judge_deferred, ...
    reason: str = ""
    error_category: ErrorCategory | None = None  # for failed episodes (score < 1)
    glyph_check: str | None = None  # charts: pass / fail / unobservable / not_applicable
    correctness: float | None = None  # charts: C, the share of rubric items satisfied (Listing 3)
    readability: float | None = None  # charts: R, the share of the 8 readability dimensions (Listing 4)
    dimensions: dict[str, int] = Field(default_factory=dict)  # charts: each readability dimension's 0/1
    # what a model judge said, as it said it (qa: {"qa": reason}; charts: the correctness reason
    # and each dimension's); `reason` stays the one-line summary
    judge_reasons: dict[str, str] = Field(default_factory=dict)
    judge_error: str | None = None  # why a judge gave no verdict (a failed call, no valid reply)
    rounds: int = 0
    tokens: int = 0  # input + output, kept for items files written before the split
    input_tokens: int = 0  # prompt tokens over the episode's model calls (each call resends the history)
    # completion tokens: Appendix H's per-task 2.2k-13.2k can only be these (a 20-round history resends far more)
    output_tokens: int = 0
    episode_status: str = "ok"
    file_judge: FileJudgeRecord | None = None  # files the File Judge decided: its verdict and trajectory
    comparator: SheetComparison | None = None  # files: the comparator's verdict (kept beside the judge's; None: unreadable reference)
    # tasks asking for several files: each file's verdict (the fields above hold the deciding file's)
    outputs: list[OutputScore] = Field(default_factory=list)
    # qa: the final value, as two attempts' answers are compared (`qa_answer_key`); "" for no answer;
    # None for charts and files (an image or a workbook has no one value to compare)
    answer: str | None = None


@dataclass(frozen=True)
class AnalyticsJudges:
    """The models behind the judged evaluators; None leaves what only they decide unscored."""

    qa: ChatModel | None = None
    chart: ChatModel | None = None
    file: FileJudge | None = None
    file_all: bool = True  # with `file`: every file to it (the paper's protocol); False: only files the comparator cannot read


def _output_paths(ep: Episode, run_dir: Path) -> list[Path]:
    """The episode's recorded files found on disk, each inside its own folder (runs/outputs.py)."""
    from deskbench.runs.outputs import episode_outputs, output_file

    sub, folder = ep.submission, episode_outputs(run_dir, ep)
    if not isinstance(sub, AnalyticsSubmission):
        return []
    return [p for p in (output_file(folder, f.name) for f in sub.files) if p is not None]


def find_output_sheet(task: AnalyticsTask, paths: Sequence[Path]) -> Path | None:
    """The file the instruction asked for by name (the task's first output); failing that, the
    only spreadsheet produced."""
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
        return base.model_copy(update={"reason": ep.error or "no submission", "error_category": category,
                                       "answer": "" if task.category == "qa" else None})
    paths = _output_paths(ep, run_dir)
    if task.category == "qa":
        return await _qa(task, sub, base, judges)
    if task.category == "visualization":
        from deskbench.runs.outputs import episode_outputs

        return await _chart(task, sub, episode_outputs(run_dir, ep) or run_dir, paths, base, judges)
    return await _file(task, paths, base, tasks_dir, judges.file, judges.file_all)


async def _qa(task: AnalyticsTask, sub: AnalyticsSubmission, base: AnalyticsItemScore,
              judges: AnalyticsJudges) -> AnalyticsItemScore:
    from deskbench.tracks.analytics.scoring.analytics_qa import score_qa

    if not sub.answer.strip():
        return base.model_copy(update={"reason": "no final answer", "error_category": "other", "answer": ""})
    v = await score_qa(task, sub.answer, recorded(judges.qa, QA_JUDGE))
    base = base.model_copy(update={"answer": qa_answer_key(v)})
    if v.source == "judge":
        said = {"qa": v.reason} if v.status == "scored" else {}
        base = base.model_copy(update={"judge_reasons": said, "judge_error": v.judge_error})
    if v.status != "scored" or v.score is None:
        return base.model_copy(update={"status": "unscored", "score": None, "source": v.source, "reason": v.reason})
    error: ErrorCategory | None = None
    if v.score < 1:
        error = "calculation" if v.reference_value is not None and v.answer_values else "semantic"
    return base.model_copy(update={"score": float(v.score), "source": v.source, "reason": v.reason,
                                   "error_category": error})


def qa_answer_key(v: QAVerdict) -> str:
    """A QA answer as two attempts' answers are compared: the last figure of its conclusion in the
    reference's unit (the value it ends on: "12.50" and "12.5 units" agree), else the conclusion's
    normalised text."""
    from deskbench.tracks.analytics.scoring.analytics_qa import normalise

    return f"{v.answer_values[-1]:.12g}" if v.answer_values else normalise(v.conclusion)


async def _chart(task: AnalyticsTask, sub: AnalyticsSubmission, files_dir: Path, paths: list[Path],
                 base: AnalyticsItemScore, judges: AnalyticsJudges) -> AnalyticsItemScore:
    from deskbench.tracks.analytics.scoring.charts import find_chart, score_chart

    chart = find_chart(paths, instruction=task.instruction, name=task.chart_file)
    if chart is None:
        return base.model_copy(update={"reason": "no chart image among the output files", "error_category": "other"})
    name = chart.relative_to(files_dir).as_posix()
    # the log of the call that wrote this chart ("" when it warned nothing); none: unobservable
    logs = ["\n".join(sub.file_warnings[name])] if name in sub.file_warnings else []
    v = await score_chart(task, chart, recorded(judges.chart, CHART_JUDGE), stderr_logs=logs)
    garbled = v.glyph_check == "fail"
    base = base.model_copy(update={"judge_reasons": v.reasons, "judge_error": v.judge_error,
                                   "dimensions": v.dimensions})
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
                                   "glyph_check": v.glyph_check, "error_category": error,
                                   "correctness": v.correctness, "readability": v.readability})


async def _file(task: AnalyticsTask, paths: list[Path], base: AnalyticsItemScore, tasks_dir: Path,
                judge: FileJudge | None, judge_all: bool) -> AnalyticsItemScore:
    """A file task: one output scored as it always was; several (AIDA rows ask for up to a few
    files) each scored alone, then combined: the task passes when every file passes, fails when
    one fails, else it is unscored. Why all-must-pass: the paper's file evaluator marks a task
    Pass or not (pass@1), and a task that asked for two files is not done when one is wrong; a
    mean over files would give partial credit the paper's 0/1 score has no place for."""
    outputs = task.outputs
    if len(outputs) == 1:
        return await _one_file(task, outputs[0], paths, base, tasks_dir, judge, judge_all, only=True)
    scored = [await _one_file(task, out, paths, base, tasks_dir, judge, judge_all, only=False) for out in outputs]
    per_file = [OutputScore(output_name=out.output_name, produced=_produced(out, paths), status=item.status,
                            score=item.score, source=item.source, reason=item.reason, comparator=item.comparator,
                            file_judge=item.file_judge)
                for out, item in zip(outputs, scored, strict=True)]
    failed = [(o, i) for o, i in zip(per_file, scored, strict=True) if i.status == "scored" and (i.score or 0.0) < 1]
    pending = [o for o in per_file if o.status != "scored"]
    sources = {o.source for o in per_file}
    source = sources.pop() if len(sources) == 1 else per_file[0].source
    if failed:
        first, item = failed[0]
        reason = f"{len(failed)} of {len(per_file)} files fail; {first.output_name}: {first.reason}"
        return item.model_copy(update={"reason": reason, "outputs": per_file})
    if pending:
        reason = f"{len(pending)} of {len(per_file)} files unscored, none failed; {pending[0].output_name}: {pending[0].reason}"
        return scored[per_file.index(pending[0])].model_copy(update={"reason": reason, "outputs": per_file})
    reason = f"all {len(per_file)} files pass: " + "; ".join(f"{o.output_name}: {o.reason}" for o in per_file)
    return scored[0].model_copy(update={"reason": reason, "source": source, "outputs": per_file})


def _produced(out: ReferenceFile, paths: Sequence[Path]) -> str | None:
    found = next((p for p in paths if p.name.lower() == out.output_name.lower()), None)
    return found.name if found is not None else None


async def _one_file(task: AnalyticsTask, out: ReferenceFile, paths: list[Path], base: AnalyticsItemScore,
                    tasks_dir: Path, judge: FileJudge | None, judge_all: bool, *, only: bool) -> AnalyticsItemScore:
    """One requested file against its reference. `only`: the task asks for this file alone, so
    the only spreadsheet produced stands for it when the name differs (with several outputs each
    is found by its name)."""
    from deskbench.tracks.analytics.scoring.file_judge import task_question
    from deskbench.tracks.analytics.scoring.sheets import compare_or_defer

    produced = find_output_sheet(task, paths) if only else next(
        (p for p in paths if p.name.lower() == out.output_name.lower()), None)
    if produced is None:
        names = ", ".join(p.name for p in paths) or "none"
        return base.model_copy(update={
            "reason": f"no output file {out.output_name!r} (files produced: {names})",
            "error_category": "other"})
    reference = tasks_dir / out.path
    outcome = compare_or_defer(reference, produced, instruction=task.instruction, key_points=task.key_points,
                               strict=out.strict_structure, why=out.structure_reason)
    if judge is not None and (judge_all or outcome.undecided):
        source = "file_judge" if judge_all else "file_judge_deferred"
        question = task_question(task.instruction, task.key_points, output=out.output_name,
                                 outputs=[o.output_name for o in task.outputs])
        record = await judge.judge(question, reference, produced, deferred=outcome.undecided)
        beside = {"source": source, "file_judge": record, "comparator": outcome.verdict}
        if record.status != "scored" or record.is_correct is None:
            reason = f"{record.reason}: {record.error}" if record.error else record.reason
            return base.model_copy(update={"status": "unscored", "score": None, "reason": reason, **beside})
        return base.model_copy(update={
            "score": 1.0 if record.is_correct else 0.0, "reason": record.reason,
            "error_category": None if record.is_correct else "other", **beside})
    if outcome.verdict is None:  # no judge: a reference that does not open stops the scoring, as it always has
        raise UserError(f"task {task.id}: {outcome.reference_error}; fix the task's reference file, or score "
                        "with --file-judge MODEL")
    result = outcome.verdict
    error: ErrorCategory | None = None
    if not result.passed:
        error = "calculation" if result.stage == "content" else "semantic"
    return base.model_copy(update={"score": 1.0 if result.passed else 0.0, "source": "comparator",
                                   "reason": f"{result.stage}: {result.reason}", "error_category": error,
                                   "comparator": result})


def analytics_score_protocol(judges: AnalyticsJudges, tasks: Sequence[AnalyticsTask]) -> list[ProtocolNote]:
    """Which protocol the scorer's options give each evaluator (the paper's, or deskbench's), so a
    number from a fallback is never read as the paper's. Built from the options, not the items:
    it says what would decide, also for categories a run happens not to have."""
    notes: list[ProtocolNote] = []
    if judges.qa is not None:
        notes.append(paper("qa evaluator", f"Listing 2 binary judge on every answer, --judge {judges.qa.id}; "
                                           "the deterministic check kept beside it"))
    else:
        notes.append(deskbench("qa evaluator", "deterministic check of the conclusion's final value, inconclusive "
                                               "answers unscored; --judge MODEL gives the paper's judge"))
    if judges.chart is not None:
        notes.append(paper("chart evaluator", f"Listings 3-4 vision judges, S = 0.7 C + 0.3 R, --chart-judge "
                                              f"{judges.chart.id}"))
    else:
        notes.append(deskbench("chart evaluator", "no chart judge: charts unscored, left out of every mean; "
                                                  "--chart-judge or --judge MODEL gives the paper's judges"))
    if judges.file is not None and judges.file_all:
        notes.append(paper("file evaluator", f"Listing 5 File Judge on every file, --file-judge {judges.file.model.id}; "
                                             "the comparator's verdict kept beside it"))
    elif judges.file is not None:
        notes.append(deskbench("file evaluator", "three-stage comparator; the File Judge only on files it cannot "
                                                 f"read: --file-judge {judges.file.model.id} --file-judge-deferred"))
    else:
        notes.append(deskbench("file evaluator", "three-stage comparator, no model; --file-judge MODEL gives "
                                                 "the paper's File Judge on every file"))
    from deskbench.tracks.analytics.scoring.sheets_structure import read_structure

    files = [t for t in tasks if t.reference_file is not None]
    # a strictness the task sets that the instruction's reading would not give (an importer's
    # decision from the same reading is no override)
    overrides = [t.id for t in files if any(
        o.strict_structure is not None and o.strict_structure != read_structure([t.instruction, *t.key_points]).strict
        for o in t.outputs)]
    several = [t.id for t in files if t.extra_outputs]
    if several:
        notes.append(deskbench("several output files", f"{len(several)} file tasks ask for more than one file: each "
                                                       "file scored alone (a File Judge run per file, told which "
                                                       "file it checks), the task passes when every file passes "
                                                       "(the paper scores a task Pass or not and says no more)"))
    if judges.file is not None and judges.file_all:
        notes.append(paper("structure strictness", "the File Judge reads it from the question, Listing 5 Stage 1"))
    elif overrides:
        shown = ", ".join(overrides[:3]) + (", ..." if len(overrides) > 3 else "")
        notes.append(deskbench("structure strictness", f"{len(overrides)} of {len(files)} file tasks set "
                                                       f"strict_structure, overriding the instruction: {shown}"))
    else:
        notes.append(paper("structure strictness", "Stage 1: strict when the instruction sets a column order, an exact "
                                                   "header or a layout, else relaxed (Listing 5); rows in order only "
                                                   "when it asks for one"))
    return notes


async def score_run(store: RunStore, system: str, judges: AnalyticsJudges, *,
                    concurrency: int = 8) -> list[AnalyticsItemScore]:
    """Every episode of `system` in an analytics run, scored (judge calls `concurrency` at a time)."""
    tasks = {t.id: t for t in store.tasks_of(AnalyticsTask)}
    tasks_file = store.meta("tasks_file")
    if not isinstance(tasks_file, str):
        raise UserError(f"{store.dir} does not record its tasks file; run 'deskbench run' on it again")
    tasks_dir = Path(tasks_file).parent
    slots = asyncio.Semaphore(concurrency)

    async def one(ep: Episode) -> AnalyticsItemScore:
        async with slots:
            with episode(ep.task_id, ep.system, ep.attempt):  # its judges' calls, kept when `score` records
                return await score_episode(tasks[ep.task_id], ep, store.dir, tasks_dir, judges)

    episodes = [ep for ep in store.episodes(system) if ep.task_id in tasks]
    return list(await asyncio.gather(*(one(ep) for ep in episodes)))
