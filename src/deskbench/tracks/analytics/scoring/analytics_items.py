"""analytics' per-item output (`score --items-out`, frame in scoring/items_out.py): each episode's
score (every field of AnalyticsItemScore, so the rows still read back as items) with the task's
instruction, its gold (reference answer, rubric key points, chart spec or reference file), the
episode's answer and output files, and each model judge's verdict and reasoning under the name
its calls have in the run store's judge_transcripts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deskbench.runs.store import RunStore
from deskbench.scoring.items_out import ItemAudit, item_row, output_files
from deskbench.scoring.judge_log import CHART_JUDGE, FILE_JUDGE, QA_JUDGE
from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask

GOLD_FIELDS = {"answer", "answer_value", "answer_unit", "computation", "key_points", "chart", "reference_file",
               "extra_outputs"}


def judge_verdicts(item: AnalyticsItemScore) -> dict[str, dict[str, Any]]:
    """What each model judge that decided (part of) the item said."""
    out: dict[str, dict[str, Any]] = {}
    if item.source == "judge":
        out[QA_JUDGE] = {"verdict": item.score, "reasoning": item.judge_reasons.get("qa"), "error": item.judge_error}
    elif item.source == "chart_judge" and (item.judge_reasons or item.judge_error or item.correctness is not None):
        out[CHART_JUDGE] = {"verdict": item.score, "correctness": item.correctness, "readability": item.readability,
                            "dimensions": item.dimensions, "reasoning": item.judge_reasons, "error": item.judge_error}
    if item.file_judge is not None:
        record = item.file_judge
        out[FILE_JUDGE] = {"verdict": record.is_correct, "reasoning": record.reason, "error": record.error,
                           "replies": record.replies, "model": record.model}
    return out


def item_audit(task: AnalyticsTask, sub: AnalyticsSubmission | None, item: AnalyticsItemScore) -> ItemAudit:
    prediction = None if sub is None else {
        "answer": sub.answer, "files": output_files(sub.files, sub.files_dir), "stop": sub.stop, "rounds": sub.rounds}
    return ItemAudit(question=task.instruction, gold=task.model_dump(mode="json", include=GOLD_FIELDS, exclude_none=True),
                     prediction=prediction, judge=judge_verdicts(item))


def item_rows(tasks: Mapping[str, AnalyticsTask], submissions: Mapping[tuple[str, str, int], AnalyticsSubmission],
              items: Sequence[AnalyticsItemScore]) -> list[dict[str, Any]]:
    """One row per item; `submissions` by (task, system, attempt)."""
    return [item_row(item.model_dump(mode="json"),
                     item_audit(tasks[item.task_id], submissions.get((item.task_id, item.system, item.attempt)), item))
            for item in items]


def store_rows(store: RunStore, items: Sequence[AnalyticsItemScore]) -> list[dict[str, Any]]:
    """The rows of a run's scored items, with the run's tasks and submissions."""
    tasks = {t.id: t for t in store.tasks_of(AnalyticsTask)}
    subs = {(e.task_id, e.system, e.attempt): e.submission for e in store.episodes()
            if isinstance(e.submission, AnalyticsSubmission)}
    return item_rows(tasks, subs, items)
