"""deliverables' per-item output (`score --items-out`, frame in scoring/items_out.py): each
episode's score (every field of DeliverableItemScore: V, each verifier's outcome and evidence, the
rubric scores, VRS, ACCEPT) with the package's prompt, its gold (golden answer and values, the
rubric with its anchors, required outputs, traps, the verifiers' specs), the episode's response
and output files, and what the model judges said: each llm_check verifier's verdict and reason,
and the rubric grade's justifications (`rubric_grader` for a model's grade, `rubric` for a
person's), under the names their calls have in the run store's judge_transcripts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deskbench.runs.store import RunStore
from deskbench.scoring.items_out import ItemAudit, item_row, output_files
from deskbench.scoring.judge_log import LLM_CHECK, RUBRIC_GRADER
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.scoring.rubric_qc_final import FinalGrade
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask

Key = tuple[str, str, int]
GOLD_FIELDS = {"golden", "rubric", "required_outputs", "traps", "solution_logic", "verifiers"}


def judge_verdicts(item: DeliverableItemScore, grade: FinalGrade | None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    checks = {r.id: {"verdict": r.status, "reasoning": r.evidence} for r in item.verifiers
              if r.judged or r.kind == "llm_check"}
    if checks:
        out[LLM_CHECK] = {"checks": checks}
    if grade is not None and item.grader == grade.grader:  # the grade scoring used (not a returned one's stand-in)
        name = RUBRIC_GRADER if grade.source == "llm" else "rubric"
        out[name] = {"grader": grade.grader, "verdict": grade.scores, "reasoning": grade.justifications,
                     "comment": grade.comment, "status": grade.status, "mean": grade.mean}
    return out


def item_audit(task: DeliverableTask, sub: DeliverableSubmission | None, item: DeliverableItemScore,
               grade: FinalGrade | None) -> ItemAudit:
    prediction = None if sub is None else {
        "response": sub.response, "files": output_files(sub.files, sub.files_dir), "stop": sub.stop,
        "rounds": sub.rounds}
    return ItemAudit(question=task.prompt, gold=task.model_dump(mode="json", include=GOLD_FIELDS, exclude_none=True),
                     prediction=prediction, judge=judge_verdicts(item, grade))


def item_rows(tasks: Mapping[str, DeliverableTask], submissions: Mapping[Key, DeliverableSubmission],
              grades: Mapping[Key, FinalGrade], items: Sequence[DeliverableItemScore]) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        key = (item.task_id, item.system, item.attempt)
        rows.append(item_row(item.model_dump(mode="json"),
                             item_audit(tasks[item.task_id], submissions.get(key), item, grades.get(key))))
    return rows


def store_rows(store: RunStore, items: Sequence[DeliverableItemScore], grades: Mapping[Key, FinalGrade]) -> list[dict[str, Any]]:
    """The rows of a run's scored items, with the run's packages, submissions and final grades."""
    tasks = {t.id: t for t in store.tasks_of(DeliverableTask)}
    subs = {(e.task_id, e.system, e.attempt): e.submission for e in store.episodes()
            if isinstance(e.submission, DeliverableSubmission)}
    return item_rows(tasks, subs, grades, items)
