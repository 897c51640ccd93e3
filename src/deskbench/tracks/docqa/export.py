"""docqa in an export (`deskbench export`, runs/export/samples.py): the question, the answer
variants as targets, the evidence pages as gold."""

from __future__ import annotations

from pydantic import BaseModel

from deskbench.contract.export import TaskText
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


def task_text(task: BaseModel) -> TaskText | None:
    if not isinstance(task, DocQATask):
        return None
    return TaskText(task.question, ["; ".join(v) for v in task.answer_variants],
                    {"answer_variants": task.answer_variants,
                     "evidence": [[e.document, e.page] for e in task.evidence]})


def answer_text(sub: BaseModel | None) -> str:
    return "; ".join(sub.answer) if isinstance(sub, DocQASubmission) else ""
