"""deliverables in an export (`deskbench export`, runs/export/samples.py): the prompt, the golden
answer as the target, its decision and values as gold."""

from __future__ import annotations

from pydantic import BaseModel

from deskbench.contract.export import TaskText
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask


def task_text(task: BaseModel) -> TaskText | None:
    if not isinstance(task, DeliverableTask):
        return None
    golden = task.golden
    return TaskText(task.prompt, [golden.answer], {"decision": golden.decision,
                                                   "values": [v.model_dump(mode="json", exclude_none=True)
                                                              for v in golden.values]})


def answer_text(sub: BaseModel | None) -> str:
    return str(sub.response or "") if isinstance(sub, DeliverableSubmission) else ""
