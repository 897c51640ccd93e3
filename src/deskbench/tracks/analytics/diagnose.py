"""analytics' part of `deskbench diagnose` (runs/diagnose.py): what an episode that ended had to
produce, by its task's category: qa a final answer, visualization a chart image, file generation
the sheet the task names."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from deskbench.runs.diagnose import FILE_CATEGORIES, code_output
from deskbench.runs.store import Episode
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask

CATEGORIES = ("no_answer", *FILE_CATEGORIES)  # what analytics_output gives besides ok and content_policy
CHART_SUFFIXES = (".png", ".jpg", ".jpeg", ".svg", ".pdf", ".webp", ".gif")


def missing_files(task: AnalyticsTask | None, files: list[str]) -> list[str]:
    """The required output files missing from `files`: the sheet(s) of a file-generation task (by
    the scorer's own rule: named as asked, else the only spreadsheet; each by name when it asks
    for several), a visualization's chart image."""
    if task is not None and task.category == "file_generation" and task.reference_file:
        from deskbench.tracks.analytics.scoring.analytics import find_output_sheet

        if task.extra_outputs:  # several files: each by its name, as the scorer finds them
            produced = {Path(f).name.casefold() for f in files}
            return [o.output_name for o in task.outputs if o.output_name.casefold() not in produced]
        found = find_output_sheet(task, [Path(f) for f in files])
        return [] if found is not None else [task.reference_file.output_name]
    if task is not None and task.category == "visualization":
        return [] if any(f.lower().endswith(CHART_SUFFIXES) for f in files) else ["a chart image"]
    return []


def analytics_output(episode: Episode, task: BaseModel | None) -> tuple[str, str]:
    """An ended episode's category: its final answer and the files its task requires."""
    sub = episode.submission
    text = sub.answer if isinstance(sub, AnalyticsSubmission) else ""
    files = [f.name for f in sub.files] if isinstance(sub, AnalyticsSubmission) else []
    analytics = task if isinstance(task, AnalyticsTask) else None
    return code_output(episode, text, files, missing_files(analytics, files),
                       answer_needed=analytics is not None and analytics.category == "qa")
