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
        target = [f"a file {o.output_name} matching the reference {o.path}" for o in task.outputs]
    elif task.chart is not None:
        target = [f"a {task.chart.chart_type} chart of " + ", ".join(s.name for s in task.chart.series)]
    elif task.category == "visualization":  # no chart spec (AIDA's charts): the image and its key points
        target = [f"a chart{f' saved as {task.chart_file}' if task.chart_file else ''} meeting the key points"]
    else:
        target = []
    gold = {k: v for k, v in {"answer_value": task.answer_value, "answer_unit": task.answer_unit,
                              "computation": task.computation, "key_points": task.key_points or None,
                              "category": task.category}.items() if v is not None}
    return TaskText(task.instruction, target, gold)


def answer_text(sub: BaseModel | None) -> str:
    return str(sub.answer or "") if isinstance(sub, AnalyticsSubmission) else ""
