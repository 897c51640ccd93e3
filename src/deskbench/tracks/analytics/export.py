"""analytics in an export (`deskbench export`, runs/export/samples.py): the instruction, what the
reference is (an answer, a file, a chart) as the target, the rest of the gold as metadata."""

from __future__ import annotations

from pydantic import BaseModel

from deskbench.contract.export import TaskText
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask


def task_text(task: BaseModel) -> TaskText | None:
    if not isinstance(task, AnalyticsTask):
        return None
    if task.answer is not None:
        target = [task.answer]
    elif task.reference_file is not None:
        target = [f"a file {task.reference_file.output_name} matching the reference {task.reference_file.path}"]
    elif task.chart is not None:
        target = [f"a {task.chart.chart_type} chart of " + ", ".join(s.name for s in task.chart.series)]
    else:
        target = []
    gold = {k: v for k, v in {"answer_value": task.answer_value, "answer_unit": task.answer_unit,
                              "computation": task.computation, "key_points": task.key_points or None,
                              "category": task.category}.items() if v is not None}
    return TaskText(task.instruction, target, gold)


def answer_text(sub: BaseModel | None) -> str:
    return str(sub.answer or "") if isinstance(sub, AnalyticsSubmission) else ""
