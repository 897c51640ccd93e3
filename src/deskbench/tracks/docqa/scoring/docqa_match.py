"""Pairing docqa submissions with tasks as the official evaluator does: question text, then id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from deskbench.errors import UserError
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


@dataclass
class Matched:
    """Submissions paired with tasks. In official mode `pairs` follows the submissions file (every
    matching row is scored, as the official evaluator does); otherwise the tasks file, one
    submission a task at most."""

    pairs: list[tuple[DocQATask, DocQASubmission | None]]
    missing: list[str]
    extra: list[str]  # submissions that match no task: their id, or the start of their question
    by_id: int = 0  # matched by id (no question text, or one that is no task's)
    id_disagrees: list[str] = field(default_factory=list)  # text and id name different tasks: text won
    repeated: list[str] = field(default_factory=list)  # official: tasks answered by more than one row


def _label(sub: DocQASubmission) -> str:
    return sub.id if sub.id else repr((sub.question or "").strip()[:40])


def match(tasks: Sequence[DocQATask], submissions: Sequence[DocQASubmission], *, official: bool = False) -> Matched:
    """Pair submissions with tasks by question text (stripped), then by id, as the official
    evaluator does. A question text shared by several tasks matches by id only (the official
    evaluator would take the last such task). Duplicate task ids are an error; outside official
    mode, so is a task answered twice."""
    by_id: dict[str, DocQATask] = {}
    for t in tasks:
        if t.id in by_id:
            raise UserError(f"duplicate task id {t.id!r}; each id may appear once: remove the repeat")
        by_id[t.id] = t
    by_text: dict[str, DocQATask] = {}
    shared: set[str] = set()
    for t in tasks:
        text = t.question.strip()
        if text in by_text and not official:
            shared.add(text)
        by_text[text] = t
    found: list[tuple[DocQATask, DocQASubmission]] = []
    extra: list[str] = []
    n_by_id, disagrees = 0, []
    for sub in submissions:
        text = (sub.question or "").strip()
        task = by_text.get(text) if text not in shared else None
        if task is None and sub.id and sub.id in by_id:
            task, n_by_id = by_id[sub.id], n_by_id + 1
        elif task is not None and sub.id and sub.id in by_id and sub.id != task.id:
            disagrees.append(sub.id)
        if task is None:
            extra.append(_label(sub))
        else:
            found.append((task, sub))
    answered: dict[str, DocQASubmission] = {}
    repeated: list[str] = []
    for task, sub in found:
        if task.id in answered:
            if not official:
                raise UserError(f"task {task.id!r} is answered twice in the submissions (matched by question "
                                "text, then id): keep one answer a task, or score with --official to count every row")
            repeated.append(task.id)
        answered[task.id] = sub
    missing = [t.id for t in tasks if t.id not in answered]
    pairs: list[tuple[DocQATask, DocQASubmission | None]]
    pairs = list(found) if official else [(t, answered.get(t.id)) for t in tasks]
    return Matched(pairs=pairs, missing=missing, extra=extra, by_id=n_by_id, id_disagrees=disagrees,
                   repeated=sorted(set(repeated)))
